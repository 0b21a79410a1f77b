// Benchmark 4: start-up and idle. Time from spawning `node bin/ephemail.js serve` to the first 200
// of /api/v1/health, and the RSS once idle. For comparison (the cost of loading TypeScript through
// tsx at run time), the same sources bundled ahead of time by esbuild (`--compiled`; a measurement
// only: the bundle is not how the service is shipped).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, machineLine, parseArgs, rssOf, sleep, spread, startService, ROOT, type BenchOptions, type Spread } from './lib.ts';

export interface StartupResult {
  name: string;
  startMs: Spread;
  idleRssMb: Spread;
}

/** Bundles src/main.ts (packages stay external) into a throwaway tree laid out like the repo. */
function bundle(): { script: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-compiled-'));
  const web = join(dir, 'src', 'web');
  mkdirSync(web, { recursive: true });
  cpSync(join(ROOT, 'src', 'web', 'assets'), join(web, 'assets'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  // web/routes.ts reads ./assets relative to itself: the bundle sits where that file would
  const script = join(web, 'ephemail.mjs');
  execFileSync(join(ROOT, 'node_modules', '.bin', 'esbuild'), [join(ROOT, 'src', 'main.ts'), '--bundle', '--platform=node', '--format=esm', '--packages=external', '--log-level=warning', `--outfile=${script}`]);
  return { script, dir };
}

async function measure(name: string, runs: number, idleMs: number, script?: string): Promise<StartupResult> {
  const starts: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < runs; i++) {
    const svc = await startService({ EPHEMAIL_LOG_LEVEL: 'warn' }, { script });
    try {
      starts.push(svc.startMs);
      await sleep(idleMs);
      rss.push(rssOf(svc.pid).rssMb);
    } finally {
      await svc.stop();
    }
  }
  return { name, startMs: spread(starts), idleRssMb: spread(rss) };
}

export async function benchStartup(opts: BenchOptions & { compiled?: boolean }, log: (s: string) => void = console.log): Promise<StartupResult[]> {
  const runs = opts.quick ? 1 : Math.max(opts.runs, 5);
  const idleMs = opts.quick ? 200 : 2000;
  const out = [await measure('node bin/ephemail.js serve (tsx)', runs, idleMs)];
  if (opts.compiled) {
    const b = bundle();
    try {
      out.push(await measure('esbuild bundle (comparison only)', runs, idleMs, b.script));
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  }
  for (const r of out) log(`  ${r.name.padEnd(34)} start to healthy ${fmt(r.startMs)} ms  idle RSS ${fmt(r.idleRssMb)} MB  (${r.startMs.runs.length} starts)`);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# Start-up and idle — ${machineLine()}`);
  await benchStartup({ ...opts, compiled: process.argv.includes('--compiled') });
}
