// The Limiter seam: fixed per-minute and per-day (UTC) windows per bucket, sliding windows of a few
// uses (the keys an IP mints), and concurrent-wait slots. Counting is atomic per backend, so N
// parallel requests against a limit of L admit exactly L.

import type { Limits } from '../config.ts';
import { REQUEST_SCALE, scaledBuckets } from '../domain/limits.ts';

export interface LimitResult {
  allowed: boolean;
  /** Set when !allowed. */
  reason?: 'rate_limited' | 'quota_exceeded';
  /** Per-minute limit (the `ratelimit-limit` header). */
  limit: number;
  /** Requests left in this minute, never negative. */
  remaining: number;
  /** Seconds until the minute window resets (`ratelimit-reset`). */
  resetSeconds: number;
  /** Seconds to wait when !allowed (`retry-after`). */
  retryAfterSeconds: number;
  usedMinute: number;
  usedDay: number;
}

/** What take() did: the use was counted, or refused until one frees (`retryAfterMs` from now). */
export type TakeResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface Limiter {
  /**
   * Counts one request against the bucket and says whether it is admitted. `perDay: Infinity`: a
   * minute window only (no day counter is kept: buckets of many short-lived names, such as SMTP
   * recipient addresses, cost one key that lives two minutes).
   */
  hit(bucket: string, limits: Limits, now: number): Promise<LimitResult>;
  /**
   * `hit` answered at once, for a limiter that counts in this process's memory (absent otherwise):
   * the request path then takes no promise turn for its count.
   */
  hitNow?(bucket: string, limits: Limits, now: number): LimitResult;
  /** The bucket's state without counting anything. */
  peek(bucket: string, limits: Limits, now: number): Promise<LimitResult>;
  /**
   * Takes one of `max` wait slots for the bucket; returns the release function, or null when all
   * are taken. A slot not released within `leaseMs` (a crashed node) frees itself.
   */
  acquireWait(bucket: string, max: number, leaseMs: number, now: number): Promise<(() => Promise<void>) | null>;
  /**
   * Counts one use of the bucket unless it already had `max` within `windowMs` before `now` (a
   * sliding window: each use frees `windowMs` after it was counted); a refused use counts nothing
   * and says when the oldest of the window frees. Atomic: parallel takes never exceed `max`. For a
   * few uses per bucket (each one is kept until it leaves the window): the keys an IP mints.
   */
  take(bucket: string, max: number, windowMs: number, now: number): Promise<TakeResult>;
  close(): Promise<void>;
}

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

/**
 * Builds a LimitResult from the counts after (or without) this request: the one refusal rule, used
 * by every edge (HTTP, the tool endpoint, the web pages). A used-up day outranks the minute window:
 * "waiting does not help" must never turn into "retry in 50 s".
 */
export function limitResult(limits: Limits, usedMinute: number, usedDay: number, now: number, counted: boolean): LimitResult {
  const resetSeconds = Math.max(1, Math.ceil((MINUTE_MS - (now % MINUTE_MS)) / 1000));
  const daySeconds = Math.max(1, Math.ceil((DAY_MS - (now % DAY_MS)) / 1000));
  const dayOver = usedDay > limits.perDay || (usedMinute > limits.perMinute && usedDay >= limits.perDay);
  const reason = !counted ? undefined : dayOver ? 'quota_exceeded' : usedMinute > limits.perMinute ? 'rate_limited' : undefined;
  // one object literal of a fixed shape (no spreads: this runs on every request)
  return {
    allowed: reason === undefined,
    reason,
    limit: limits.perMinute,
    remaining: Math.max(0, limits.perMinute - usedMinute),
    resetSeconds,
    retryAfterSeconds: reason === 'quota_exceeded' ? daySeconds : reason === 'rate_limited' ? resetSeconds : 0,
    usedMinute: Math.min(usedMinute, limits.perMinute),
    usedDay: Math.min(usedDay, limits.perDay),
  };
}

/** The `ratelimit-*` response headers of a result (HTTP and the web pages). */
export function limitHeaders(r: LimitResult): Record<'ratelimit-limit' | 'ratelimit-remaining' | 'ratelimit-reset', string> {
  return { 'ratelimit-limit': String(r.limit), 'ratelimit-remaining': String(r.remaining), 'ratelimit-reset': String(r.resetSeconds) };
}

/**
 * Counts (or, with count false, reports) one request of a client IP: in its own bucket and, for
 * IPv6, in its /56 and /48 at REQUEST_SCALE times the limits, so a site cannot multiply its quota
 * by spreading over its /64s. The result is the first refusal, narrowest first, else the client's
 * own bucket (its headers). `prefix` names a family of buckets (the MCP sessions' ceiling).
 */
export function hitClient(limiter: Limiter, ip: string, limits: Limits, now: number, count = true, prefix = ''): Promise<LimitResult> {
  const buckets = scaledBuckets(ip, REQUEST_SCALE);
  const one = (bucket: string, l: Limits) => (count ? limiter.hit(prefix + bucket, l, now) : limiter.peek(prefix + bucket, l, now));
  if (buckets.length === 1) return one(buckets[0].bucket, limits);
  return Promise.all(buckets.map(({ bucket, factor }) => one(bucket, factor === 1 ? limits : scaleLimits(limits, factor)))).then(
    (results) => results.find((r) => !r.allowed) ?? results[0],
  );
}

export function scaleLimits(limits: Limits, factor: number): Limits {
  return { perMinute: limits.perMinute * factor, perDay: limits.perDay * factor };
}
