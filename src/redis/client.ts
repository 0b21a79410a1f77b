// Connecting to Redis or Redis Cluster from EPHEMAIL_STORE, and the one rule for its failures: a
// Redis that cannot be reached is a StoreUnavailableError (HTTP 500 + retry-after, SMTP 451).
// Commands never queue while Redis is away (enableOfflineQueue: false): they fail at once, and the
// client reconnects by itself (retryStrategy) so the node recovers with no restart.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { StoreUnavailableError } from '../domain/errors.ts';

export type RedisClient = Redis | Cluster;

export interface RedisTarget {
  cluster: boolean;
  nodes: { host: string; port: number }[];
  db: number;
  username?: string;
  password?: string;
  tls: boolean;
  /** Prefix of every key (default `ephemail:`), from `?prefix=`. */
  prefix: string;
}

const DEFAULT_PREFIX = 'ephemail:';

/**
 * Parses `redis://[user:pass@]host[:port][/db][?prefix=p]`, `rediss://…` (TLS) and
 * `redis+cluster://[user:pass@]h1:p1,h2:p2[?prefix=p]`.
 */
export function parseRedisUrl(url: string): RedisTarget {
  const m = /^(redis|rediss|redis\+cluster):\/\/(?:([^@/]*)@)?([^/?]+)(?:\/(\d+))?\/?(?:\?(.*))?$/.exec(url);
  if (!m) throw new Error(`EPHEMAIL_STORE=${JSON.stringify(url)} is not a Redis URL: expected redis://host:port[/db], rediss://… or redis+cluster://h1:p1,h2:p2`);
  const [, scheme, auth, hosts, db, query] = m;
  const nodes = hosts.split(',').map((h) => {
    const hp = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(h.trim());
    if (!hp) throw new Error(`EPHEMAIL_STORE: bad host ${JSON.stringify(h)}`);
    return { host: hp[1], port: hp[2] ? Number(hp[2]) : 6379 };
  });
  let username: string | undefined;
  let password: string | undefined;
  if (auth) {
    const i = auth.indexOf(':');
    username = decodeURIComponent(i >= 0 ? auth.slice(0, i) : '') || undefined;
    password = decodeURIComponent(i >= 0 ? auth.slice(i + 1) : auth) || undefined;
  }
  const params = new URLSearchParams(query ?? '');
  const prefix = params.get('prefix') ?? DEFAULT_PREFIX;
  if (!prefix || /[{}\s]/.test(prefix)) throw new Error(`EPHEMAIL_STORE: prefix ${JSON.stringify(prefix)} must be non-empty, without braces or spaces`);
  const cluster = scheme === 'redis+cluster';
  if (cluster && db && db !== '0') throw new Error('EPHEMAIL_STORE: Redis Cluster has only database 0');
  if (!cluster && nodes.length !== 1) throw new Error('EPHEMAIL_STORE: several hosts need redis+cluster://');
  return { cluster, nodes, db: db ? Number(db) : 0, username, password, tls: scheme === 'rediss', prefix };
}

export interface ConnectOptions {
  /** A command without a reply after this long fails as unavailable (default 10 s). */
  commandTimeoutMs?: number;
  /** The pub/sub connection: it may queue its own SUBSCRIBE while connecting. */
  subscriber?: boolean;
  name?: string;
}

/** Reconnect delay: 100 ms, growing to at most 2 s, forever. */
const retry = (times: number) => Math.min(100 * times, 2000);

export function connect(target: RedisTarget, options: ConnectOptions = {}): RedisClient {
  const base: RedisOptions = {
    username: target.username,
    password: target.password,
    tls: target.tls ? {} : undefined,
    connectTimeout: 5000,
    commandTimeout: options.subscriber ? undefined : (options.commandTimeoutMs ?? 10_000),
    keepAlive: 10_000,
    maxRetriesPerRequest: 0, // a command in flight when the connection drops fails now, never replays later
    autoResendUnfulfilledCommands: false,
    connectionName: options.name,
    disableClientInfo: true,
  };
  if (target.cluster) {
    const opts: ClusterOptions = {
      enableOfflineQueue: !!options.subscriber,
      clusterRetryStrategy: retry,
      scaleReads: 'master',
      slotsRefreshTimeout: 2000,
      retryDelayOnClusterDown: 200,
      redisOptions: base,
    };
    return new Cluster(target.nodes, opts);
  }
  return new Redis({
    ...base,
    host: target.nodes[0].host,
    port: target.nodes[0].port,
    db: target.db,
    enableOfflineQueue: !!options.subscriber,
    retryStrategy: retry,
  });
}

/** Resolves when the client is ready, or rejects after `ms`. */
export function whenReady(client: RedisClient, ms: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new StoreUnavailableError(`Redis not ready after ${ms} ms (status ${client.status})`));
    }, ms);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

/** Server replies that mean "Redis cannot serve right now", as opposed to a bug in a command. */
const UNAVAILABLE_REPLY = /^(LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|BUSY|NOREPLICAS|READONLY|MISCONF|OOM|MOVED|ASK)\b/;

/** Maps a failure of a Redis command: unreachable (or not serving) → StoreUnavailableError. */
export function toStoreError(err: unknown): Error {
  if (err instanceof StoreUnavailableError) return err;
  const e = err as Error;
  if (e?.name === 'ReplyError' && !UNAVAILABLE_REPLY.test(e.message)) return e;
  return new StoreUnavailableError(`Redis unavailable: ${e?.message ?? String(err)}`, { cause: err });
}

/** Runs a Redis call, translating its failure. */
export async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toStoreError(err);
  }
}

/** Quits politely when Redis answers, else drops the connection; never throws. */
export async function closeClient(client: RedisClient): Promise<void> {
  if (client.status === 'end') return;
  try {
    if (client.status !== 'ready') throw new Error('not ready');
    await Promise.race([client.quit(), new Promise((_, reject) => setTimeout(() => reject(new Error("quit timeout")), 2000).unref())]);
  } catch {
    client.disconnect();
  }
}

export type ScriptArg = string | number | Buffer;
/** A registered script's caller: its keys, then its arguments. */
export type ScriptRun = (keys: string[], args: ScriptArg[]) => Promise<unknown>;

/** Registers a script (EVALSHA, falling back to EVAL after a Redis restart) and returns its caller. */
export function script(client: RedisClient, name: string, source: string, numberOfKeys: number): ScriptRun {
  client.defineCommand(name, { lua: source, numberOfKeys });
  const fn = (client as unknown as Record<string, (...a: ScriptArg[]) => Promise<unknown>>)[name].bind(client);
  return (keys, args) => fn(...keys, ...args);
}


/** How long a write waits for its replicas (EPHEMAIL_REDIS_MIN_REPLICAS) before it counts as failed. */
export const REPLICA_WAIT_MS = 2000;

/**
 * A registered script whose writes must reach `minReplicas` replicas before it resolves: the script
 * and a WAIT go in one pipeline, so the WAIT runs on the connection (and the master) that ran the
 * write — on Cluster, the node that owns the script's keys. Fewer acknowledgements within
 * REPLICA_WAIT_MS fail as unavailable (the sender gets a 451 and retries; the write itself may stay
 * on the master, which a retry then duplicates rather than loses). minReplicas 0: the plain script.
 */
export function replicatedScript(client: RedisClient, name: string, source: string, numberOfKeys: number, minReplicas: number): ScriptRun {
  const plain = script(client, name, source, numberOfKeys);
  if (minReplicas <= 0) return plain;
  return async (keys, args) => {
    const pipeline = client.pipeline() as unknown as Record<string, (...a: ScriptArg[]) => unknown> & { wait(n: number, ms: number): unknown; exec(): Promise<[Error | null, unknown][] | null> };
    pipeline[name](...keys, ...args);
    pipeline.wait(minReplicas, REPLICA_WAIT_MS);
    const replies = await pipeline.exec();
    if (!replies) throw new StoreUnavailableError('Redis pipeline aborted');
    const [[err, result], [waitErr, acks]] = replies;
    if (err) throw err;
    if (waitErr) throw waitErr;
    if (Number(acks) < minReplicas) {
      throw new StoreUnavailableError(`only ${Number(acks)} of ${minReplicas} Redis replicas acknowledged the write within ${REPLICA_WAIT_MS} ms`);
    }
    return result;
  };
}
