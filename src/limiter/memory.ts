// In-process limiter for single-node deployments (SQLite). Counters live in memory: a restart
// forgets the current windows, which only ever favours the caller.
import type { Limits } from '../config.ts';
import { DAY_MS, MINUTE_MS, limitResult, type Limiter, type TakeResult } from './limiter.ts';

interface Counter {
  window: number;
  count: number;
}

export function createMemoryLimiter(): Limiter {
  // by bucket, one map per window kind: a request's bucket string is looked up as it is (no key is
  // built per request)
  const minutes = new Map<string, Counter>();
  const days = new Map<string, Counter>();
  const slots = new Map<string, Map<number, number>>(); // bucket → slot id → lease expiry
  const windows = new Map<string, { windowMs: number; uses: number[] }>(); // take(): bucket → use times, oldest first
  let nextSlot = 1;
  let sweepAt = 0;

  const read = (counters: Map<string, Counter>, bucket: string, window: number) => {
    const c = counters.get(bucket);
    return c && c.window === window ? c.count : 0;
  };
  const incr = (counters: Map<string, Counter>, bucket: string, window: number) => {
    const c = counters.get(bucket);
    if (c === undefined) {
      counters.set(bucket, { window, count: 1 });
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
    for (const [k, c] of minutes) if (c.window !== minute) minutes.delete(k);
    for (const [k, c] of days) if (c.window !== day) days.delete(k);
    for (const [k, w] of windows) if ((w.uses.at(-1) ?? 0) <= now - w.windowMs) windows.delete(k);
  };

  const hitNow = (bucket: string, limits: Limits, now: number) => {
    sweep(now);
    const minute = Math.floor(now / MINUTE_MS);
    const day = Math.floor(now / DAY_MS);
    const usedMinute = incr(minutes, bucket, minute);
    if (usedMinute > limits.perMinute) return limitResult(limits, usedMinute, read(days, bucket, day), now, true);
    // a bucket without a day window (perDay: Infinity) keeps no day counter
    const usedDay = Number.isFinite(limits.perDay) ? incr(days, bucket, day) : 0;
    return limitResult(limits, usedMinute, usedDay, now, true);
  };

  return {
    hitNow,
    async hit(bucket: string, limits: Limits, now: number) {
      return hitNow(bucket, limits, now);
    },
    async peek(bucket: string, limits: Limits, now: number) {
      return limitResult(limits, read(minutes, bucket, Math.floor(now / MINUTE_MS)), read(days, bucket, Math.floor(now / DAY_MS)), now, false);
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
      minutes.clear();
      days.clear();
      slots.clear();
      windows.clear();
    },
  };
}
