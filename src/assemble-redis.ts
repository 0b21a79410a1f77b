// Redis backends (EPHEMAIL_STORE=redis://…, rediss://…, redis+cluster://…): one store connection
// shared with the limiter, one pub/sub connection for the bus. Loaded lazily by assemble.ts.
import type { Logger } from 'pino';
import type { Backends } from './backends.ts';
import { createRedisBus } from './bus/redis.ts';
import { redactStoreUrl, type Config } from './config.ts';
import { createRedisLimiter } from './limiter/redis.ts';
import { connect, parseRedisUrl, whenReady, type RedisClient } from './redis/client.ts';
import { keyspace } from './redis/keys.ts';
import { createRedisStore } from './store/redis/redis-store.ts';
import { createRedisUids } from './store/redis/uids.ts';

/** How long start-up waits for Redis before starting anyway (degraded until Redis answers). */
const STARTUP_WAIT_MS = 5000;

/** Logs connection state changes once each, not every reconnect attempt. */
function watch(client: RedisClient, role: string, log: Logger): void {
  let down = false;
  client.on('error', (err: Error) => {
    if (!down) log.warn({ err: { message: err.message }, role }, 'redis connection error');
    down = true;
  });
  // 'reconnecting', not 'close': a client closed on purpose (closeClient) closes without reconnecting
  client.on('reconnecting', () => {
    if (!down) log.warn({ role }, 'redis connection lost; reconnecting');
    down = true;
  });
  client.on('ready', () => {
    if (down) log.info({ role }, 'redis connection restored');
    down = false;
  });
}

/**
 * Warns when Redis is set up so that mail acknowledged with a 250 (or an API key) could be lost:
 * no AOF, or an eviction policy that may drop keys without a TTL (docs/scaling.md "Durability").
 * Managed services often refuse CONFIG: then nothing is said.
 */
async function checkDurability(client: RedisClient, log: Logger): Promise<void> {
  try {
    const [, appendonly] = (await client.call('CONFIG', 'GET', 'appendonly')) as string[];
    const [, fsync] = (await client.call('CONFIG', 'GET', 'appendfsync')) as string[];
    const [, policy] = (await client.call('CONFIG', 'GET', 'maxmemory-policy')) as string[];
    if (appendonly !== 'yes') log.warn('Redis runs without appendonly: acknowledged mail and API keys are lost if Redis restarts (docs/scaling.md, Durability)');
    else if (fsync !== 'always') log.info({ appendfsync: fsync }, 'Redis fsyncs its AOF less than always: a power loss can drop up to about a second of acknowledged mail');
    if (policy?.startsWith('allkeys-')) log.warn({ maxmemory_policy: policy }, 'Redis may evict API keys under memory pressure; use noeviction or a volatile-* policy');
  } catch {
    // CONFIG disabled or Redis not reachable yet: nothing to report
  }
}

export async function openRedisBackends(config: Config, log: Logger): Promise<Backends> {
  const target = parseRedisUrl(config.store);
  const keys = keyspace(target.prefix);
  const main = connect(target, { name: 'ephemail' });
  const sub = connect(target, { subscriber: true, name: 'ephemail-bus' });
  watch(main, 'store', log);
  watch(sub, 'bus', log);
  try {
    await whenReady(main, STARTUP_WAIT_MS);
  } catch (err) {
    log.error({ err: { message: (err as Error).message }, store: redactStoreUrl(config.store) },
      'Redis is not reachable; starting degraded (health 503, API 500, SMTP 451) until it answers');
  }
  await checkDurability(main, log);
  const store = createRedisStore({ client: main, keys, cluster: target.cluster, minReplicas: config.redisMinReplicas });
  return {
    store,
    limiter: createRedisLimiter({ client: main, keys, log }),
    bus: createRedisBus({ publisher: main, subscriber: sub, channel: keys.channel, cluster: target.cluster, log }),
    uids: createRedisUids(main, keys),
  };
}
