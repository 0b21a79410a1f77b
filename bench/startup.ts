// Benchmark 4: start-up and idle. Time from spawning `node bin/ephemail.js serve` (what `npm start`
// runs: the esbuild bundle of src/, scripts/build.mjs) to the first 200 of /api/v1/health, and the
// RSS once idle. For comparison (`--compiled`, the flag's old name: compare the two ways of running),
// the same command with EPHEMAIL_TSX=1, which loads the TypeScript sources through tsx at run time.
// Also the CPU an idle service uses (its timers: user + system, all threads), in ms per second.
import { fileURLToPath } from 'node:url';
import { compiledEntry } from '../scripts/build.mjs';
import { cpuMsOf, fmt, machineLine, parseArgs, rssOf, sleep, spread, startService, type BenchOptions, type Spread } from './lib.ts';

export interface StartupResult {
  name: string;
  startMs: Spread;
  idleRssMb: Spread;
  /** CPU used while idle, ms per second of wall time. */
  idleCpuMsPerS: Spread;
}

async function measure(name: string, runs: number, idleMs: number, env: Record<string, string> = {}): Promise<StartupResult> {
  const starts: number[] = [];
  const rss: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < runs; i++) {
    const svc = await startService({ EPHEMAIL_LOG_LEVEL: 'warn', ...env });
    try {
      starts.push(svc.startMs);
      await sleep(idleMs);
      rss.push(rssOf(svc.pid).rssMb);
      const cpu0 = cpuMsOf(svc.pid);
      const t0 = performance.now();
      await sleep(idleMs); // idle: nothing is sent; what it costs is the service's own timers
      cpu.push(((cpuMsOf(svc.pid) - cpu0) * 1000) / (performance.now() - t0));
    } finally {
      await svc.stop();
    }
  }
  return { name, startMs: spread(starts), idleRssMb: spread(rss), idleCpuMsPerS: spread(cpu) };
}

export async function benchStartup(opts: BenchOptions & { compiled?: boolean }, log: (s: string) => void = console.log): Promise<StartupResult[]> {
  const runs = opts.quick ? 1 : Math.max(opts.runs, 5);
  const idleMs = opts.quick ? 200 : 2000;
  await compiledEntry(); // built before the clock starts, as `npm ci` does (start never builds: a stale bundle only warns)
  const out = [await measure('node bin/ephemail.js serve', runs, idleMs)];
  if (opts.compiled) out.push(await measure('same, EPHEMAIL_TSX=1 (tsx)', runs, idleMs, { EPHEMAIL_TSX: '1' }));
  for (const r of out) log(`  ${r.name.padEnd(34)} start to healthy ${fmt(r.startMs)} ms  idle RSS ${fmt(r.idleRssMb)} MB  idle CPU ${fmt(r.idleCpuMsPerS, 1)} ms/s  (${r.startMs.runs.length} starts)`);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# Start-up and idle — ${machineLine()}`);
  await benchStartup({ ...opts, compiled: process.argv.includes('--compiled') });
}
