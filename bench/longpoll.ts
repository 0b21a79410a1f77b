// Benchmark 3: long-poll fan-out. 10,000 held `wait` requests across 2,000 addresses (limits raised
// by env, spread over several keys), then one mail to each address over SMTP. Prints the wake-up
// latency from each address's 250 to each of its responses (p50/p99/max) and the service's RSS with
// all waits held. Needs about 2 × waits file descriptors (`ulimit -n`).
import { request, type ClientRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { createKey, fmt, machineLine, parseArgs, percentile, rssOf, sleep, spread, startServices, storeLabel, type BenchOptions, type ServiceProcess, type Spread } from './lib.ts';
import { runLoad, textMessage } from './smtp-load.ts';

const WAIT_SECONDS = 30;

/** CPU time (ms) the process has used so far, from /proc. */
async function cpuMs(pid: number): Promise<number> {
  const { readFileSync } = await import('node:fs');
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime in clock ticks (100 Hz)
}

/** Number of emails in a list response body; -1 for anything else (an error body). */
function emailsIn(body: Buffer[] | null): number {
  try {
    return body ? JSON.parse(Buffer.concat(body).toString()).data.length : -1;
  } catch {
    return -1;
  }
}

export interface LongPollResult {
  waits: number;
  addresses: number;
  p50: Spread;
  p99: Spread;
  max: Spread;
  heldRssMb: Spread;
  /** Several nodes: RSS of each with all waits held (heldRssMb is the highest). */
  heldRssPerNodeMb?: Spread[];
  /** Several nodes: wake-ups whose mail arrived through another node than the one holding the wait. */
  crossNode?: number;
  failed: number;
  /** The rate the mail that wakes the waits went in at (msgs/s): latencies compare under like loads. */
  mailRate: Spread;
}

interface Held {
  address: number;
  /** index of the node holding it */
  node?: number;
  req: ClientRequest;
  done: Promise<{ at: number; status: number; body: Buffer[] | null }>;
}

async function oneRun(opts: BenchOptions, waits: number, addresses: number, shared?: ServiceProcess) {
  // several nodes (Redis store): waits held on node i % N, mail through the nodes round-robin
  const set = shared ? null : await startServices(opts, { EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: String(waits) });
  const nodes = set ? set.nodes : [shared!];
  const svc = nodes[0];
  const held: Held[] = [];
  try {
    // warm-up: the parse workers and the SQLite writer thread start with the first mail; a service
    // that has received mail before has them running
    await runLoad({ port: svc.smtpPort, ports: nodes.map((n) => n.smtpPort), connections: 5 * nodes.length, messages: 50 * nodes.length, message: textMessage(2), rcpt: (i) => `warm${i}@ephemail.test` });
    await sleep(opts.quick ? 50 : 1000);
    const keyCount = Math.max(1, Math.ceil(waits / 1000)); // the limiter scans a key's slots on each acquire
    const keys: string[] = [];
    for (let i = 0; i < keyCount; i++) keys.push(await createKey(svc.http, `bench-${i}`));
    const tag = Date.now().toString(36);
    const addr = (i: number) => `lp${i}-${tag}@ephemail.test`;
    // connections are opened at most CONNECTING at a time: past the listen backlog a SYN is retried
    // seconds later, and that wait would reach the service after its mail
    const CONNECTING = 200;
    let sending = 0;
    let sent = 0;
    let wake: (() => void) | null = null;
    const onSent = () => {
      sending--;
      sent++;
      wake?.();
    };
    for (let i = 0; i < waits; i++) {
      const a = i % addresses;
      let req!: ClientRequest;
      const done = new Promise<{ at: number; status: number; body: Buffer[] | null }>((resolve) => {
        req = request(
          {
            host: '127.0.0.1',
            port: nodes[i % nodes.length].httpPort,
            path: `/api/v1/inboxes/${encodeURIComponent(addr(a))}/emails?wait=${WAIT_SECONDS}`,
            headers: { authorization: `Bearer ${keys[i % keyCount]}` },
            agent: false,
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const at = performance.now();
              // the body is read after the run: one commit answers ~100 waits at once, and parsing
              // each here would delay the next one's timestamp by this process's own work
              resolve({ at, status: res.statusCode ?? 0, body: chunks });
            });
          },
        );
        req.on('error', () => resolve({ at: performance.now(), status: 0, body: null }));
        req.once('finish', onSent);
        req.end();
      });
      sending++;
      held.push({ address: a, node: i % nodes.length, req, done });
      while (sending >= CONNECTING) await new Promise<void>((r) => (wake = r));
    }
    while (sent < waits) await new Promise<void>((r) => (wake = r));
    // held = every request reached the service and it went quiet (CPU idle over a window)
    const settleDeadline = Date.now() + (waits > 1000 ? 20_000 : 2_000);
    const cpuAll = async () => (await Promise.all(nodes.map((n) => cpuMs(n.pid)))).reduce((a, b) => a + b, 0);
    let last = await cpuAll();
    for (;;) {
      await sleep(250);
      const now = await cpuAll();
      if (now - last < 10 || Date.now() > settleDeadline) break;
      last = now;
    }
    const heldRssPerNode = nodes.map((n) => rssOf(n.pid).rssMb);
    const heldRss = Math.max(...heldRssPerNode);
    // one mail per address; remember when each 250 arrived
    const okAt = new Map<number, number>();
    const mailNode = new Map<number, number>();
    const mail = await runLoad({
      port: svc.smtpPort,
      ports: nodes.map((n) => n.smtpPort),
      connections: Math.min(20, addresses),
      messages: addresses,
      message: textMessage(2),
      rcpt: (i) => addr(i),
      onReply: (i, code, _line, _sent, at, conn) => code === 250 && (okAt.set(i, at), mailNode.set(i, conn % nodes.length)),
    });
    let timer: NodeJS.Timeout | undefined;
    const results = await Promise.race([
      Promise.all(held.map((h) => h.done)),
      new Promise<null>((r) => (timer = setTimeout(() => r(null), WAIT_SECONDS * 1000 + 5000))),
    ]).finally(() => clearTimeout(timer));
    if (!results) throw new Error('waits did not all answer');
    const lat: number[] = [];
    let failed = mail.failed;
    let crossNode = 0;
    results.forEach((r, i) => {
      const sent = okAt.get(held[i].address);
      if (r.status !== 200 || emailsIn(r.body) < 1 || sent === undefined) failed++;
      else {
        lat.push(r.at - sent);
        if (mailNode.get(held[i].address) !== held[i].node) crossNode++;
      }
    });
    lat.sort((a, b) => a - b);
    return { p50: percentile(lat, 50), p99: percentile(lat, 99), max: lat.at(-1) ?? NaN, heldRss, heldRssPerNode, crossNode, failed, mailRate: mail.msgsPerSec };
  } finally {
    for (const h of held) h.req.destroy();
    await set?.stop();
  }
}

/** `shared`: a running service to use (and leave running) instead of starting one per run. */
export async function benchLongPoll(opts: BenchOptions, log: (s: string) => void = console.log, shared?: ServiceProcess): Promise<LongPollResult> {
  const waits = opts.quick ? 50 : 10_000;
  const addresses = opts.quick ? 10 : 2_000;
  const runs: Awaited<ReturnType<typeof oneRun>>[] = [];
  for (let i = 0; i < opts.runs; i++) runs.push(await oneRun(opts, waits, addresses, shared));
  const r: LongPollResult = {
    waits,
    addresses,
    p50: spread(runs.map((x) => x.p50)),
    p99: spread(runs.map((x) => x.p99)),
    max: spread(runs.map((x) => x.max)),
    heldRssMb: spread(runs.map((x) => x.heldRss)),
    failed: runs.reduce((a, x) => a + x.failed, 0),
    mailRate: spread(runs.map((x) => x.mailRate)),
  };
  const nodeCount = runs[0]?.heldRssPerNode.length ?? 1;
  if (nodeCount > 1) {
    r.heldRssPerNodeMb = runs[0].heldRssPerNode.map((_, n) => spread(runs.map((x) => x.heldRssPerNode[n])));
    r.crossNode = runs.reduce((a, x) => a + x.crossNode, 0);
  }
  log(`  ${waits} waits / ${addresses} addresses: wake-up after the 250 p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  max ${fmt(r.max, 1)} ms  RSS with all held ${r.heldRssPerNodeMb ? r.heldRssPerNodeMb.map((x) => fmt(x)).join(' / ') : fmt(r.heldRssMb)} MB  failed ${r.failed}  (mail at ${fmt(r.mailRate)} msgs/s)${r.crossNode !== undefined ? `  cross-node wake-ups ${r.crossNode} of ${waits * runs.length - r.failed}` : ''}`);
  return r;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# Long-poll fan-out (${storeLabel(opts)}), ${opts.runs} run(s) — ${machineLine()}`);
  await benchLongPoll(opts);
}
