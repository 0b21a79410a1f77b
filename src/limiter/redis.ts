// The Redis limiter: the per-minute and per-day counters and the wait slots of a bucket are shared by
// every node, so limits hold for the service as a whole. Counting is one Lua script (atomic); wait
// slots are a sorted set scored by lease expiry, so a crashed node's slots free themselves; a sliding
// window (take) is a sorted set of its uses scored by time.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Limits } from '../config.ts';
import { call, closeClient, script, type RedisClient } from '../redis/client.ts';
import type { Keyspace } from '../redis/keys.ts';
import { ACQUIRE_WAIT, LIMIT_HIT, TAKE } from './redis-scripts.ts';
import { DAY_MS, MINUTE_MS, limitResult, type Limiter, type TakeResult } from './limiter.ts';

export interface RedisLimiterOptions {
  client: RedisClient;
  keys: Keyspace;
  /** Quits the client on close (default false: the store owns the shared connection). */
  ownsClient?: boolean;
  log?: Logger;
}

export function createRedisLimiter(options: RedisLimiterOptions): Limiter {
  const { client, keys: k, log } = options;
  const limitHit = script(client, 'ephLimitHit', LIMIT_HIT, 2);
  const acquireWait = script(client, 'ephAcquireWait', ACQUIRE_WAIT, 1);
  const take = script(client, 'ephTake', TAKE, 1);
  const counters = (bucket: string, now: number) => {
    const base = k.limiterBase(bucket);
    return [`${base}m:${Math.floor(now / MINUTE_MS)}`, `${base}d:${Math.floor(now / DAY_MS)}`] as const;
  };

  return {
    async hit(bucket: string, limits: Limits, now: number) {
      const [m, d] = counters(bucket, now);
      const [usedMinute, usedDay] = (await call(() => limitHit([m, d], [limits.perMinute, 2 * MINUTE_MS, 2 * DAY_MS, Number.isFinite(limits.perDay) ? 1 : 0]))) as [number, number];
      return limitResult(limits, usedMinute, usedDay, now, true);
    },
    /**
     * Reports without counting. While Redis is unreachable it reports an empty window instead of
     * failing: peek only feeds headers on routes outside the quota (health must still answer 503).
     */
    async peek(bucket: string, limits: Limits, now: number) {
      const [m, d] = counters(bucket, now);
      try {
        const [usedMinute, usedDay] = await call(() => (client as RedisClient & { mget(...keys: string[]): Promise<(string | null)[]> }).mget(m, d));
        return limitResult(limits, Number(usedMinute ?? 0), Number(usedDay ?? 0), now, false);
      } catch (err) {
        log?.debug({ err }, 'limiter peek failed; reporting an empty window');
        return limitResult(limits, 0, 0, now, false);
      }
    },
    async acquireWait(bucket: string, max: number, leaseMs: number, now: number) {
      const key = `${k.limiterBase(bucket)}w`;
      const slot = randomUUID();
      const taken = await call(() => acquireWait([key], [now, max, leaseMs, slot]));
      if (taken !== 1) return null;
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        // a failed release is harmless: the lease expires by itself
        await client.zrem(key, slot).catch((err: unknown) => log?.debug({ err }, 'wait slot release failed; its lease will expire'));
      };
    },
    async take(bucket: string, max: number, windowMs: number, now: number): Promise<TakeResult> {
      const res = (await call(() => take([`${k.limiterBase(bucket)}t`], [now, windowMs, max, randomUUID()]))) as number[];
      return res[0] === 1 ? { ok: true } : { ok: false, retryAfterMs: Number(res[1]) };
    },
    async close() {
      if (options.ownsClient) await closeClient(client);
    },
  };
}
