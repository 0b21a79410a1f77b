// Shared pieces of the benchmarks: start the service as a child process (`node bin/ephemail.js serve`),
// read its peak RSS, summarise runs (median and min–max), format figures.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, freePort, spawnServe } from '../test/helpers/serve.ts';

export { BIN, ROOT, freePort };

export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  http: string;
  httpPort: number;
  smtpPort: number;
  /** ms from spawn to the first 200 of /api/v1/health */
  startMs: number;
  dir: string;
  stop(): Promise<void>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once something listens on 127.0.0.1:`port` (10 s at most). */
export async function waitPort(port: number): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const ok = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), r(true)));
      s.once('error', () => r(false));
    });
    if (ok) return;
    await sleep(10);
  }
  throw new Error(`port ${port} never opened`);
}

/** Limits raised so the benchmark measures speed, not the quota. */
export const BENCH_ENV: Record<string, string> = {
  EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000000',
  EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000000',
  EPHEMAIL_LIMIT_KEY_PER_MINUTE: '100000000',
  EPHEMAIL_LIMIT_KEY_PER_DAY: '1000000000',
  EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: '100000',
  EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '1000',
  EPHEMAIL_MAX_HELD_WAITS: '1000000',
  EPHEMAIL_LOG_LEVEL: 'warn',
};

let benchDns: Promise<string> | null = null;
/**
 * `EPHEMAIL_DNS_SERVERS` for a benchmark's services: one DNS server on loopback per benchmark run, in
 * a child process (bench/dns-server.ts, zone in bench/zone.ts) that ends with the benchmark.
 */
export function benchDnsServers(): Promise<string> {
  benchDns ??= new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'dns-server.ts')], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (!out.includes('\n')) return;
      // up: from now on it does not keep the benchmark alive (it ends when its stdin closes)
      child.unref();
      for (const s of [child.stdin, child.stdout] as unknown as { unref?: () => void }[]) s.unref?.();
      resolve(out.trim());
    });
    child.on('exit', (code) => reject(new Error(`the benchmark DNS server exited with ${code}`)));
  });
  return benchDns;
}

/**
 * Starts `node bin/ephemail.js serve` (test/helpers/serve.ts, the one spawn helper) on free ports
 * with a fresh SQLite file (on disk, so durability costs are real) and waits for health. `nodeArgs` go
 * before the script (e.g. --cpu-prof); `script` is another checkout's bin/ephemail.js.
 */
export async function startService(env: Record<string, string> = {}, opts: { nodeArgs?: string[]; timeoutMs?: number; script?: string } = {}): Promise<ServiceProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-bench-'));
  let served;
  try {
    const dns: Record<string, string> = env.EPHEMAIL_DNS_SERVERS ? {} : { EPHEMAIL_DNS_SERVERS: await benchDnsServers() };
    served = await spawnServe({ ...BENCH_ENV, ...dns, EPHEMAIL_STORE: `sqlite:${join(dir, 'bench.db')}`, ...env }, { ready: 'health', cwd: dir, nodeArgs: opts.nodeArgs, script: opts.script, timeoutMs: opts.timeoutMs, name: 'service' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const { child, http, httpPort, smtpPort, startMs } = served;
  return {
    child,
    pid: child.pid!,
    http,
    httpPort,
    smtpPort,
    startMs,
    dir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const done = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await done;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Current and peak resident set size of a process, in MB (from /proc; Linux only). */
/** CPU time (user + system, all threads) the process has used so far, in ms (Linux /proc). */
export function cpuMsOf(pid: number): number {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime, stime in USER_HZ (100 on Linux)
}

/**
 * Waits until the process is idle (under 20 ms of CPU in a 500 ms window, at most `maxMs`) and
 * returns its CPU time then: work a load left behind (background verdicts) is counted with the load.
 */
export async function cpuMsSettled(pid: number, maxMs = 120_000): Promise<number> {
  const end = Date.now() + maxMs;
  let last = cpuMsOf(pid);
  for (;;) {
    await sleep(500);
    const now = cpuMsOf(pid);
    if (now - last < 20 || Date.now() > end) return now;
    last = now;
  }
}

export function rssOf(pid: number): { rssMb: number; peakMb: number } {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? 0);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return { rssMb: NaN, peakMb: NaN };
  }
}

/** Samples a process's RSS every `ms` until stopped; returns the maximum seen (VmHWM also works, this tracks phases). */
export function rssSampler(pid: number, ms = 50) {
  let max = 0;
  const t = setInterval(() => (max = Math.max(max, rssOf(pid).rssMb)), ms);
  return {
    stop() {
      clearInterval(t);
      return Math.max(max, rssOf(pid).rssMb);
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function spread(values: number[]): Spread {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return { median: mid, min: s[0], max: s[s.length - 1], runs: values };
}

const fmtNum = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : String(n));

/** "1234 (1200–1300)" */
export function fmt(s: Spread, digits = 0, unit = ''): string {
  return `${fmtNum(s.median, digits)}${unit} (${fmtNum(s.min, digits)}–${fmtNum(s.max, digits)})`;
}

export function machineLine(): string {
  const cpus = readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? 'unknown cpu';
  const n = (readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm) ?? []).length;
  return `${new Date().toISOString()} · ${n}× ${cpus} · Node ${process.version} · load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`;
}

export interface BenchOptions {
  quick: boolean;
  runs: number;
  /** `sqlite` (default): one node on a fresh SQLite file; `redis`: `nodes` nodes sharing one Redis. */
  store?: 'sqlite' | 'redis';
  /** Nodes to start (Redis store only; default 1). Load is spread over them round-robin. */
  nodes?: number;
  /** Redis to use with `store: 'redis'` (a keys prefix of its own is added, and its keys deleted after). */
  redisUrl?: string;
  /** The build to run: another checkout's `bin/ephemail.js` (bench/compare.ts); default this one's. */
  script?: string;
}

/** Default Redis of `--store redis`: database 13 of the local Redis (plus a prefix per service set). */
export const DEFAULT_BENCH_REDIS_URL = process.env.EPHEMAIL_BENCH_REDIS_URL || 'redis://127.0.0.1:6379/13';

const VALUE_FLAGS = ['--store', '--nodes', '--redis'];

export function parseArgs(argv: string[]): BenchOptions & { only: string[] } {
  const quick = argv.includes('--quick');
  const runsArg = argv.find((a) => a.startsWith('--runs='));
  const runs = runsArg ? Math.max(1, Number(runsArg.slice(7))) : quick ? 1 : 3;
  // `--store redis` / `--store=redis`, `--nodes 3` / `--nodes=3`, `--redis=redis://host:port/db`
  const value = (flag: string): string | undefined => {
    const eq = argv.find((a) => a.startsWith(flag + '='));
    if (eq) return eq.slice(flag.length + 1);
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const only = argv.filter((a, i) => !a.startsWith('--') && !VALUE_FLAGS.includes(argv[i - 1]));
  const store = value('--store') ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'redis') throw new Error(`--store ${store}: pick sqlite or redis`);
  const nodes = Math.max(1, Number(value('--nodes') ?? 1));
  if (store === 'sqlite' && nodes > 1) throw new Error('--nodes > 1 needs --store redis (SQLite is one process)');
  return { quick, runs, only, store, nodes, redisUrl: value('--redis') ?? DEFAULT_BENCH_REDIS_URL };
}

/** "sqlite" or "redis, 3 nodes" */
export function storeLabel(opts: BenchOptions): string {
  return opts.store === 'redis' ? `redis, ${opts.nodes ?? 1} node${(opts.nodes ?? 1) > 1 ? 's' : ''}` : 'sqlite';
}

/** The nodes a benchmark drives (one for SQLite), and how to stop them and clean up after them. */
export interface ServiceSet {
  nodes: ServiceProcess[];
  /** Peak RSS of each node, MB. */
  peakRss(): number[];
  stop(): Promise<void>;
}

let serviceSets = 0;

/**
 * Starts what `opts` asks for: one SQLite node (as `startService`), or `opts.nodes` nodes on one Redis
 * with a key prefix of their own (`bench-<pid>-<time>-<n>:`), the same session secret, each on its own
 * ports. `stop()` stops the nodes, then deletes every key under the prefix.
 */
export async function startServices(opts: BenchOptions, env: Record<string, string> = {}): Promise<ServiceSet> {
  const nodes: ServiceProcess[] = [];
  const make = (cleanup: () => Promise<void>): ServiceSet => ({
    nodes,
    peakRss: () => nodes.map((n) => rssOf(n.pid).peakMb),
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
      await cleanup();
    },
  });
  if (opts.store !== 'redis') {
    nodes.push(await startService(env, { script: opts.script }));
    return make(async () => {});
  }
  const base = opts.redisUrl ?? DEFAULT_BENCH_REDIS_URL;
  const prefix = `bench-${process.pid}-${Date.now().toString(36)}-${serviceSets++}:`;
  const [path, query = ''] = base.split('?');
  const params = new URLSearchParams(query);
  params.set('prefix', prefix); // ours, whatever the URL had
  const url = `${path}?${params}`;
  const shared = { EPHEMAIL_STORE: url, EPHEMAIL_SESSION_SECRET: randomBytes(32).toString('hex'), ...env };
  const set = make(async () => void (await deleteRedisKeys(base, prefix)));
  try {
    for (let i = 0; i < (opts.nodes ?? 1); i++) nodes.push(await startService(shared, { script: opts.script }));
  } catch (err) {
    await set.stop();
    throw err;
  }
  return set;
}

/** Deletes every key under `prefix` (SCAN + UNLINK) in the Redis of `url`; returns how many. */
export async function deleteRedisKeys(url: string, prefix: string): Promise<number> {
  const { Redis } = await import('ioredis');
  const u = new URL(url);
  if (u.protocol !== 'redis:') throw new Error(`not a redis:// URL: ${url}`);
  const r = new Redis({
    host: u.hostname,
    port: Number(u.port || 6379),
    db: Number(u.pathname.slice(1) || 0),
    username: decodeURIComponent(u.username) || undefined,
    password: decodeURIComponent(u.password) || undefined,
    lazyConnect: true,
    maxRetriesPerRequest: 2,
  });
  await r.connect();
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) deleted += await r.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
  return deleted;
}

/** Creates an API key over HTTP. */
export async function createKey(http: string, label = 'bench'): Promise<string> {
  const r = await fetch(`${http}/api/v1/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label }) });
  if (r.status !== 201) throw new Error(`POST /keys: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { data: { api_key: string } }).data.api_key;
}
