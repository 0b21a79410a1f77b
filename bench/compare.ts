// Two builds of ephemail, measured in one run: `--base` is another checkout (a worktree of an older
// commit, with node_modules) and "this" is the checkout this file is in. Ingest runs are interleaved
// run by run against one smtp-sink (sink, base, this; then sink, this, base; …), so both builds' ratios
// share one reference and the machine's drift falls on both alike; the API reads and the long-poll
// benchmarks run whole, base and this alternately, `--rounds` times. Prints each figure for both builds
// and this/base.
//
//   git worktree add /tmp/base <commit> && (cd /tmp/base && npm ci)
//   node --import tsx bench/compare.ts --base=/tmp/base [--runs=5] [--rounds=3] [ingest api longpoll]
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { benchApi } from './api.ts';
import { BIN, fmt, machineLine, parseArgs, spread, startServices, type BenchOptions, type Spread } from './lib.ts';
import { benchLongPoll } from './longpoll.ts';
import { cases, CONNECTIONS, loadOnce, openSink, SMTP_SINK, SMTP_SOURCE, smtpSource } from './smtp.ts';

const argv = process.argv.slice(2);
const opts = parseArgs(argv.filter((a) => !a.startsWith('--base=') && !a.startsWith('--rounds=')));
const baseDir = argv.find((a) => a.startsWith('--base='))?.slice(7);
const rounds = Math.max(1, Number(argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? (opts.quick ? 1 : 3)));
const runs = argv.some((a) => a.startsWith('--runs=')) ? opts.runs : opts.quick ? 1 : 5;
if (!baseDir || !existsSync(join(resolve(baseDir), 'bin', 'ephemail.js'))) {
  console.error('usage: bench/compare.ts --base=<another checkout, with node_modules> [--runs=N] [--rounds=N] [--quick] [ingest api longpoll]');
  process.exit(2);
}
const builds = [
  { name: 'base', script: join(resolve(baseDir), 'bin', 'ephemail.js') },
  { name: 'this', script: BIN },
] as const;
const picked = opts.only.length ? opts.only : ['ingest', 'api', 'longpoll'];
const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
const vs = (base: number, mine: number) => `this/base ${(mine / base).toFixed(2)}`;
const quiet = () => {};
/** Which build goes first in run `i`: base then this, then this then base, and so on. */
const order = (i: number) => (i % 2 ? [1, 0] : [0, 1]);

async function ingest(o: BenchOptions): Promise<void> {
  if (!SMTP_SINK) console.log('  smtp-sink not installed (Debian package postfix): ingest figures without a reference');
  for (const c of cases(o.quick)) {
    const sink = await openSink();
    const sets = [];
    try {
      for (const b of builds) sets.push(await startServices({ ...o, script: b.script }));
      const smtp = sets.map((s) => s.nodes.map((n) => n.smtpPort));
      if (!o.quick) for (const ports of smtp) await loadOnce(ports, { message: c.message, messages: Math.min(c.messages, 500) }); // warm-up
      const got: number[][] = [[], []];
      const failed = [0, 0];
      const ref: number[] = [];
      for (let i = 0; i < runs; i++) {
        if (sink) ref.push((await loadOnce(sink.port, c)).msgsPerSec);
        for (const k of order(i)) {
          const r = await loadOnce(smtp[k], c);
          got[k].push(r.msgsPerSec);
          failed[k] += r.failed;
        }
      }
      const [a, b] = got.map(spread);
      const s: Spread | null = ref.length ? spread(ref) : null;
      const share = (x: Spread) => (s ? ` (${pct(x.median / s.median)} of sink)` : '');
      console.log(`  ${c.message.name.padEnd(22)} base ${fmt(a)}${share(a)} | this ${fmt(b)}${share(b)} msgs/s | smtp-sink ${s ? fmt(s) : 'n/a'} | ${vs(a.median, b.median)}`);
      // a message not acknowledged would otherwise hide in a fast figure
      if (failed[0] + failed[1] > 0) console.log(`    messages not acknowledged: base ${failed[0]} | this ${failed[1]} (figures above are not comparable)`);
      if (!o.quick && sink && SMTP_SOURCE && c.message.name === cases(false)[0].message.name) {
        const src: number[][] = [[], []];
        const srcRef: number[] = [];
        for (let i = 0; i < runs; i++) {
          srcRef.push(smtpSource(sink.port, c.messages, 5 * 1024)?.msgsPerSec ?? NaN);
          for (const k of order(i)) src[k].push(smtpSource(smtp[k][0], c.messages, 5 * 1024)?.msgsPerSec ?? NaN);
        }
        const [sa, sb] = src.map(spread);
        const sr = spread(srcRef);
        console.log(`  smtp-source -s ${CONNECTIONS} -l 5120  base ${fmt(sa)} (${pct(sa.median / sr.median)} of sink) | this ${fmt(sb)} (${pct(sb.median / sr.median)} of sink) msgs/s | smtp-sink ${fmt(sr)} | ${vs(sa.median, sb.median)}`);
      }
    } finally {
      await Promise.all(sets.map((s) => s.stop()));
      sink?.stop();
    }
  }
}

/** Runs a whole benchmark for base and this alternately, `rounds` times; returns [base, this] per round. */
async function alternate<T>(run: (o: BenchOptions) => Promise<T>): Promise<T[][]> {
  const out: T[][] = [[], []];
  for (let i = 0; i < rounds; i++) for (const k of order(i)) out[k].push(await run({ ...opts, runs: 1, script: builds[k].script }));
  return out;
}

console.log(`# ephemail, two builds in one run: base = ${resolve(baseDir)}, this = ${resolve(BIN, '..', '..')} — ${machineLine()}; ingest ${runs} interleaved run(s), API and long-poll ${rounds} alternating round(s); median (min–max)`);
if (picked.includes('ingest')) {
  console.log('## SMTP ingest (250 = committed), one smtp-sink for both');
  await ingest(opts);
}
if (picked.includes('api')) {
  console.log('## API reads, share of bare Fastify measured beside each run');
  const [a, b] = await alternate((o) => benchApi(o, quiet));
  for (let i = 0; i < a[0].length; i++) {
    const share = (rs: typeof a) => spread(rs.map((r) => r[i].ratio * 100));
    const rps = (rs: typeof a) => spread(rs.map((r) => r[i].rps.median));
    console.log(`  ${a[0][i].name.padEnd(20)} base ${fmt(share(a))}% (${fmt(rps(a))} req/s) | this ${fmt(share(b))}% (${fmt(rps(b))} req/s) of bare | ${vs(share(a).median, share(b).median)}`);
  }
}
if (picked.includes('longpoll')) {
  console.log('## Long-poll fan-out: wake-up after the 250');
  const [a, b] = await alternate((o) => benchLongPoll(o, quiet));
  const p = (rs: typeof a, k: 'p50' | 'p99') => spread(rs.map((r) => r[k].median));
  console.log(`  ${a[0].waits} waits / ${a[0].addresses} addresses  p50 base ${fmt(p(a, 'p50'), 1)} | this ${fmt(p(b, 'p50'), 1)} ms  p99 base ${fmt(p(a, 'p99'), 1)} | this ${fmt(p(b, 'p99'), 1)} ms | p99 this/base ${(p(b, 'p99').median / p(a, 'p99').median).toFixed(2)}`);
  // the mail that wakes them, as fast as each build takes it in: a faster ingest is a heavier load on the waits
  const rate = (rs: typeof a) => spread(rs.map((r) => r.mailRate.median));
  console.log(`  mail in at base ${fmt(rate(a))} | this ${fmt(rate(b))} msgs/s (20 connections, one mail per address)`);
  // a wait that failed (an error status, no mail, a socket refused) would otherwise hide in a fast figure
  const failed = (rs: typeof a) => rs.reduce((n, r) => n + r.failed, 0);
  console.log(`  failed waits: base ${failed(a)} | this ${failed(b)}${failed(a) + failed(b) > 0 ? '  (figures above are not comparable)' : ''}`);
}
