// Benchmark 1: SMTP ingest end to end. 20 pipelined sessions against `ephemail serve` (a 250 means
// committed to SQLite with synchronous=FULL); 5 KB text, 50 KB HTML, 1 MB with attachment. In the same
// run: Postfix's smtp-sink as the protocol ceiling (same Node generator), and smtp-source against both
// when Postfix's tools are installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fmt, freePort, machineLine, parseArgs, percentile, rssOf, sleep, spread, waitPort, startServices, storeLabel, type BenchOptions, type ServiceProcess } from './lib.ts';
import { attachmentMessage, htmlMessage, runLoad, textMessage, type Message } from './smtp-load.ts';

export const SMTP_SINK = ['/usr/sbin/smtp-sink', '/usr/lib/postfix/sbin/smtp-sink'].find((p) => existsSync(p)) ?? null;
export const SMTP_SOURCE = ['/usr/sbin/smtp-source', '/usr/lib/postfix/sbin/smtp-source'].find((p) => existsSync(p)) ?? null;

export interface IngestCase {
  message: Message;
  messages: number;
}

export function cases(quick: boolean): IngestCase[] {
  return quick
    ? [
        { message: textMessage(5), messages: 60 },
        { message: htmlMessage(50), messages: 20 },
        { message: attachmentMessage(1024), messages: 4 },
      ]
    : [
        { message: textMessage(5), messages: 15_000 },
        { message: htmlMessage(50), messages: 2_000 },
        { message: attachmentMessage(1024), messages: 200 },
      ];
}

export const CONNECTIONS = 20;

export interface RunFigures {
  msgsPerSec: number;
  mbPerSec: number;
  p50: number;
  p99: number;
  failed: number;
}

/** `port`: one port, or several nodes' ports (sessions spread round-robin). */
export async function loadOnce(port: number | number[], c: IngestCase, connections = CONNECTIONS): Promise<RunFigures> {
  await sleep(100); // the service counts a closed session off its per-IP cap (20) a moment later
  const ports = typeof port === 'number' ? [port] : port;
  const r = await runLoad({ port: ports[0], ports, connections, messages: c.messages, message: c.message, rcpt: (i) => `user${i % 500}@ephemail.test`, timeoutMs: 180_000 });
  if (r.ok === 0) throw new Error(`no message accepted: ${r.firstError}`);
  return { msgsPerSec: r.msgsPerSec, mbPerSec: r.mbPerSec, p50: percentile(r.latencies, 50), p99: percentile(r.latencies, 99), failed: r.failed + (c.messages - r.ok - r.failed) };
}

/** A fresh smtp-sink on a free port, listening; null when Postfix's smtp-sink is not installed. */
export async function openSink(): Promise<{ port: number; stop(): void } | null> {
  if (!SMTP_SINK) return null;
  const port = await freePort();
  // -u: drop root to nobody; 1000: listen backlog. Accepts everything, stores nothing.
  const proc = spawn(SMTP_SINK, ['-u', 'nobody', `127.0.0.1:${port}`, '1000'], { stdio: 'ignore' });
  await waitPort(port);
  return { port, stop: () => proc.kill('SIGTERM') };
}

/** smtp-source: -s parallel sessions, -m messages in all, -l message size, -d: keep each session for many messages (no pipelining). */
export function smtpSource(port: number, messages: number, sizeBytes: number): { msgsPerSec: number } | null {
  if (!SMTP_SOURCE) return null;
  const t0 = performance.now();
  const r = spawnSync(SMTP_SOURCE, ['-d', '-s', String(CONNECTIONS), '-m', String(messages), '-l', String(sizeBytes), '-f', 'sender@bench.example', '-t', 'user1@ephemail.test', `127.0.0.1:${port}`], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 });
  const ms = performance.now() - t0;
  if (r.status !== 0) return null;
  return { msgsPerSec: (messages / ms) * 1000 };
}

export interface IngestResult {
  name: string;
  msgsPerSec: ReturnType<typeof spread>;
  mbPerSec: ReturnType<typeof spread>;
  p50: ReturnType<typeof spread>;
  p99: ReturnType<typeof spread>;
  peakRssMb: number;
  /** Peak RSS of each node (one for SQLite), MB. */
  peakRssPerNodeMb?: number[];
  failed: number;
  sinkMsgsPerSec?: ReturnType<typeof spread>;
}

/** `shared`: a running service to use (and leave running) instead of a fresh one per case. */
export async function benchIngest(opts: BenchOptions & { cases?: string[] }, log: (s: string) => void = console.log, shared?: ServiceProcess): Promise<IngestResult[]> {
  const results: IngestResult[] = [];
  if (!SMTP_SINK) log('  (smtp-sink not installed: apt-get install postfix for the protocol ceiling)');
  const all = cases(opts.quick).filter((c) => !opts.cases?.length || opts.cases.some((k) => c.message.name.toLowerCase().includes(k)));
  for (const c of all) {
    // a fresh smtp-sink per case, as the service is fresh per case: no reference carries the load of
    // the cases before it
    const sink = await openSink();
    try {
      const set = shared ? null : await startServices(opts);
      const svc = shared ?? set!.nodes[0];
      const ports = set ? set.nodes.map((n) => n.smtpPort) : [svc.smtpPort];
      try {
        // warm-up: JIT, SQLite page cache, worker start
        if (!opts.quick) await loadOnce(ports, { message: c.message, messages: Math.min(c.messages, 500) });
        const runs: RunFigures[] = [];
        const sinkRuns: number[] = [];
        for (let i = 0; i < opts.runs; i++) {
          if (sink) sinkRuns.push((await loadOnce(sink.port, c)).msgsPerSec);
          runs.push(await loadOnce(ports, c));
        }
        const r: IngestResult = {
          name: c.message.name,
          msgsPerSec: spread(runs.map((x) => x.msgsPerSec)),
          mbPerSec: spread(runs.map((x) => x.mbPerSec)),
          p50: spread(runs.map((x) => x.p50)),
          p99: spread(runs.map((x) => x.p99)),
          peakRssMb: set ? Math.max(...set.peakRss()) : rssOf(svc.pid).peakMb,
          peakRssPerNodeMb: set ? set.peakRss() : [rssOf(svc.pid).peakMb],
          failed: runs.reduce((a, x) => a + x.failed, 0),
          sinkMsgsPerSec: sinkRuns.length ? spread(sinkRuns) : undefined,
        };
        results.push(r);
        const ratio = r.sinkMsgsPerSec ? `  | smtp-sink ${fmt(r.sinkMsgsPerSec)} msgs/s → ephemail at ${((r.msgsPerSec.median / r.sinkMsgsPerSec.median) * 100).toFixed(0)}% of sink` : '';
        log(`  ${r.name.padEnd(22)} ${fmt(r.msgsPerSec)} msgs/s  ${fmt(r.mbPerSec, 1)} MB/s  p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  peak RSS ${r.peakRssPerNodeMb!.map((m) => m.toFixed(0)).join(' / ')} MB  failed ${r.failed}${ratio}`);
        if (!opts.quick && SMTP_SOURCE && sink && ports.length === 1 && c.message.name === cases(false)[0].message.name) {
          const src = [];
          const srcSink = [];
          for (let i = 0; i < opts.runs; i++) {
            const a = smtpSource(sink.port, c.messages, 5 * 1024);
            const b = smtpSource(svc.smtpPort, c.messages, 5 * 1024);
            if (a && b) (srcSink.push(a.msgsPerSec), src.push(b.msgsPerSec));
          }
          if (src.length) {
            const e = spread(src);
            const s = spread(srcSink);
            log(`  smtp-source -s ${CONNECTIONS} -l 5120: smtp-sink ${fmt(s)} msgs/s, ephemail ${fmt(e)} msgs/s → ${((e.median / s.median) * 100).toFixed(0)}% of sink`);
          }
        }
      } finally {
        await set?.stop();
      }
    } finally {
      sink?.stop();
    }
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# SMTP ingest (${storeLabel(opts)}), ${CONNECTIONS} pipelined sessions, ${opts.runs} run(s) — ${machineLine()}`);
  // positional words pick cases by name: `text`, `html`, `attachment`
  await benchIngest({ ...opts, cases: opts.only });
}
