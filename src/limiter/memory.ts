// In-process limiter for single-node deployments (SQLite). Counters live in memory: a restart
// forgets the current windows, which only ever favours the caller.
import type { Limits } from '../config.ts';
import { DAY_MS, MINUTE_MS, limitResult, type Limiter, type TakeResult } from './limiter.ts';

export function createMemoryLimiter(): Limiter {
  const counters = new Map<string, { window: number; count: number }>();
  const slots = new Map<string, Map<number, number>>(); // bucket → slot id → lease expiry
  const windows = new Map<string, { windowMs: number; uses: number[] }>(); // take(): bucket → use times, oldest first
  let nextSlot = 1;
  let sweepAt = 0;

  const read = (key: string, window: number) => {
    const c = counters.get(key);
    return c && c.window === window ? c.count : 0;
  };
  const incr = (key: string, window: number) => {
    const c = counters.get(key);
    if (c === undefined) {
      counters.set(key, { window, count: 1 });
      return 1;
    }
    if (c.window !== window) {
      c.window = window;
      c.count = 0;
    }
    return ++c.count;
  };
  const sweep = (now: number) => {
    if (now < sweepAt) return;
    sweepAt = now + MINUTE_MS;
    const minute = Math.floor(now / MINUTE_MS);
    const day = Math.floor(now / DAY_MS);
    for (const [k, c] of counters) {
      if (c.window !== (k.startsWith('m:') ? minute : day)) counters.delete(k);
    }
    for (const [k, w] of windows) if ((w.uses.at(-1) ?? 0) <= now - w.windowMs) windows.delete(k);
  };

  const hitNow = (bucket: string, limits: Limits, now: number) => {
    sweep(now);
    const minute = Math.floor(now / MINUTE_MS);
    const day = Math.floor(now / DAY_MS);
    const usedMinute = incr(`m:${bucket}`, minute);
    if (usedMinute > limits.perMinute) return limitResult(limits, usedMinute, read(`d:${bucket}`, day), now, true);
    // a bucket without a day window (perDay: Infinity) keeps no day counter
    const usedDay = Number.isFinite(limits.perDay) ? incr(`d:${bucket}`, day) : 0;
    return limitResult(limits, usedMinute, usedDay, now, true);
  };

  return {
    hitNow,
    async hit(bucket: string, limits: Limits, now: number) {
      return hitNow(bucket, limits, now);
    },
    async peek(bucket: string, limits: Limits, now: number) {
      return limitResult(limits, read(`m:${bucket}`, Math.floor(now / MINUTE_MS)), read(`d:${bucket}`, Math.floor(now / DAY_MS)), now, false);
    },
    async acquireWait(bucket: string, max: number, leaseMs: number, now: number) {
      let held = slots.get(bucket);
      if (!held) slots.set(bucket, (held = new Map()));
      // lapsed leases only matter when the bucket looks full (with thousands of waits per key, a
      // scan on every acquire was quadratic)
      if (held.size >= max) {
        for (const [id, expiry] of held) if (expiry <= now) held.delete(id);
        if (held.size >= max) return null;
      }
      const id = nextSlot++;
      held.set(id, now + leaseMs);
      return async () => {
        const h = slots.get(bucket);
        if (!h) return;
        h.delete(id);
        if (h.size === 0) slots.delete(bucket);
      };
    },
    async take(bucket: string, max: number, windowMs: number, now: number): Promise<TakeResult> {
      sweep(now);
      const w = windows.get(bucket) ?? { windowMs, uses: [] };
      w.windowMs = windowMs;
      w.uses = w.uses.filter((t) => t > now - windowMs);
      if (w.uses.length >= max) {
        if (max <= 0) return { ok: false, retryAfterMs: windowMs };
        return { ok: false, retryAfterMs: Math.max(1, w.uses[w.uses.length - max] + windowMs - now) };
      }
      w.uses.push(now);
      w.uses.sort((a, b) => a - b);
      windows.set(bucket, w);
      return { ok: true };
    },
    async close() {
      counters.clear();
      slots.clear();
      windows.clear();
    },
  };
}
