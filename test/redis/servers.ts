// Test helpers: private redis-server processes and a 3-master Redis Cluster on loopback ports, in temp
// dirs, always stopped by the test (and killed on exit should a test crash); key cleanup by prefix.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { portFree } from '../helpers/serve.ts';
import { until } from '../helpers/time.ts';

/** The shared Redis of `npm test` ('' when missing: Redis tests then skip, loudly). */
export const TEST_REDIS_URL = process.env.EPHEMAIL_TEST_REDIS_URL ?? '';
/** EPHEMAIL_STORE for the shared test Redis with its keys under `prefix` (one test's own keyspace). */
export const testStoreUrl = (prefix: string): string => {
  const u = new URL(TEST_REDIS_URL);
  return `redis://${u.host}${u.pathname === '/' ? '' : u.pathname}?prefix=${prefix}`;
};
export const SKIP_REDIS = TEST_REDIS_URL ? false : 'NO REDIS: EPHEMAIL_TEST_REDIS_URL is empty (start redis-server; CI fails on this)';
export const HAVE_REDIS_SERVER = spawnSync('redis-server', ['--version']).status === 0;
export const SKIP_SERVER = SKIP_REDIS || (HAVE_REDIS_SERVER ? false : 'NO redis-server binary: cannot start a private Redis or Cluster');
if (SKIP_REDIS) console.error(`\n### ${SKIP_REDIS} ###\n`);

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/**
 * A free loopback port whose cluster-bus port (+10000) is free too, both below Linux's ephemeral range
 * (32768 and up): a port found free there could be taken by any outgoing connection of a test running
 * beside this one before redis-server binds it.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 2700);
    if ((await portFree(port)) && (await portFree(port + 10000))) return port;
  }
  throw new Error('no free port');
}

const waitFor = (what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> => until(() => check().catch(() => false), what, ms, 50);

const cli = (port: number, ...args: string[]) => spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 10_000 });

export interface RedisProcess {
  port: number;
  url: string;
  dir: string;
  /** Starts (again) with the same port and data dir. */
  start(): Promise<void>;
  /** SIGKILL: no shutdown save; only what was fsynced survives. */
  kill(): Promise<void>;
  /** Stops it and removes its dir. */
  stop(): Promise<void>;
}

/**
 * A private redis-server; with `appendfsync: 'always'` every acknowledged write is on disk. A server
 * that exits before it answers (its port taken meanwhile by another test's) is started again on
 * another port, up to three times.
 */
export async function startRedis(options: { appendfsync?: 'always' | 'everysec'; extra?: string[] } = {}): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const proc = redisOn(await freePort(), options);
    try {
      await proc.start();
      return proc;
    } catch (err) {
      await proc.stop();
      if (attempt >= 3 || !(err instanceof ExitedEarly)) throw err;
    }
  }
}

class ExitedEarly extends Error {}

function redisOn(port: number, options: { appendfsync?: 'always' | 'everysec'; extra?: string[] }): RedisProcess {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-redis-'));
  let child: ChildProcess | null = null;
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no', '--protected-mode', 'yes', '--loglevel', 'warning',
    ...(options.appendfsync ? ['--appendonly', 'yes', '--appendfsync', options.appendfsync] : ['--appendonly', 'no']), ...(options.extra ?? [])];
  const proc: RedisProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    async start() {
      const c = spawn('redis-server', args, { stdio: 'ignore' });
      child = c;
      children.add(c);
      c.once('exit', () => children.delete(c));
      await waitFor(`redis-server :${port}`, async () => c.exitCode !== null || c.signalCode !== null || cli(port, 'PING').stdout.trim() === 'PONG');
      if (c.exitCode !== null || c.signalCode !== null) throw new ExitedEarly(`redis-server :${port} exited (${c.exitCode ?? c.signalCode}) before it answered`);
    },
    async kill() {
      const c = child;
      if (!c || c.exitCode !== null) return;
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await gone;
      child = null;
    },
    async stop() {
      await proc.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return proc;
}

export interface RedisCluster {
  ports: number[];
  /** redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 (the masters as created) */
  url: string;
  /** Every node process, masters first as created (their roles change after a failover). */
  nodes: RedisProcess[];
  stop(): Promise<void>;
}

/**
 * A real Redis Cluster on loopback, created with `redis-cli --cluster create`: `masters` masters
 * (3 by default) and `replicas` replicas of each (none by default). With replicas, every node
 * appends with `appendfsync always` and the node timeout is 1 s, so a killed master fails over fast.
 */
export async function startCluster(masters = 3, replicas = 0): Promise<RedisCluster> {
  const nodes: RedisProcess[] = [];
  const timeout = replicas > 0 ? '1000' : '2000';
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      nodes.push(await startRedis({ appendfsync: replicas > 0 ? 'always' : undefined, extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', timeout] }));
    }
    const create = spawnSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'], { encoding: 'utf8', timeout: 30_000 });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}\n${create.stderr}`);
    for (const n of nodes) await waitFor(`cluster state ok on :${n.port}`, async () => /cluster_state:ok/.test(cli(n.port, 'CLUSTER', 'INFO').stdout));
    if (replicas > 0) {
      // every replica attached and in sync before anyone writes
      for (const n of nodes.slice(0, masters)) {
        await waitFor(`${replicas} replica(s) online on :${n.port}`, async () => (cli(n.port, 'INFO', 'replication').stdout.match(/state=online/g) ?? []).length >= replicas);
      }
    }
  } catch (err) {
    for (const n of nodes) await n.stop();
    throw err;
  }
  const ms = nodes.slice(0, masters);
  return {
    ports: ms.map((n) => n.port),
    url: `redis+cluster://${ms.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    nodes,
    async stop() {
      for (const n of nodes) await n.stop();
    },
  };
}

/** `CLUSTER INFO` / `INFO replication` of one node, as text ('' when it does not answer). */
export const redisInfo = (port: number, ...section: string[]) => cli(port, ...section).stdout ?? '';

/** Calls `each` with every batch of keys starting with `prefix` (on each master of a cluster). */
async function scanPrefix(client: Redis | Cluster, prefix: string, each: (node: Redis, keys: string[]) => Promise<void>): Promise<void> {
  const targets: Redis[] = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of targets) {
    let cursor = '0';
    for (let i = 0; i < 100_000; i++) {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      await each(node, keys);
      cursor = next;
      if (cursor === '0') break;
    }
  }
}

/** Deletes every key starting with `prefix`; returns how many. */
export async function dropPrefix(client: Redis | Cluster, prefix: string): Promise<number> {
  let n = 0;
  await scanPrefix(client, prefix, async (node, keys) => {
    for (const key of keys) n += await node.del(key);
  });
  return n;
}

/** Counts keys starting with `prefix`. */
export async function countPrefix(client: Redis | Cluster, prefix: string): Promise<number> {
  let n = 0;
  await scanPrefix(client, prefix, async (_node, keys) => {
    n += keys.length;
  });
  return n;
}

/**
 * `describe`, or, when the suite must skip (no Redis, no redis-server binary), one skipped test
 * carrying the reason: a skipped describe counts as no test at all in the runner's totals, so the
 * suites would vanish instead of showing as skipped.
 */
export function describeRedis(name: string, options: { skip: string | false; concurrency?: number }, fn: () => void): void {
  if (options.skip) test(name, { skip: options.skip }, () => undefined);
  else describe(name, options, fn);
}
