// The one Limiter conformance suite: run unchanged against the memory and Redis limiters.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { DAY_MS, MINUTE_MS, type Limiter } from '../../src/limiter/limiter.ts';

export interface LimiterHarness {
  open(): Promise<Limiter>;
  cleanup?(): Promise<void>;
  skip?: string | false;
}

const bucket = () => `key:${randomUUID()}`;
/** The start of the current minute, plus 1 s: a whole minute ahead, in the real day. */
const minuteStart = () => Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS + 1000;

export function limiterSuite(name: string, harness: LimiterHarness): void {
  if (harness.skip) {
    // one skipped test with the reason: a skipped describe would count as no test at all
    it(`Limiter conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Limiter conformance: ${name}`, { concurrency: 1 }, () => {
    const withLimiter = (title: string, fn: (l: Limiter) => Promise<void>) =>
      it(title, async () => {
        const l = await harness.open();
        try {
          await fn(l);
        } finally {
          await l.close();
        }
      });

    withLimiter('counts per minute; the request over the limit is rate_limited until the next minute', async (l) => {
      const b = bucket();
      const limits = { perMinute: 3, perDay: 100 };
      const t = minuteStart();
      for (let i = 1; i <= 3; i++) {
        const r = await l.hit(b, limits, t + i);
        assert.equal(r.allowed, true);
        assert.equal(r.remaining, 3 - i);
        assert.equal(r.limit, 3);
        assert.equal(r.usedMinute, i);
      }
      const over = await l.hit(b, limits, t + 10);
      assert.equal(over.allowed, false);
      assert.equal(over.reason, 'rate_limited');
      assert.equal(over.remaining, 0);
      assert.ok(over.retryAfterSeconds >= 1 && over.retryAfterSeconds <= 60);
      assert.equal(over.usedDay, 3, 'a refused request does not count against the day');
      const next = await l.hit(b, limits, t + MINUTE_MS);
      assert.equal(next.allowed, true);
      assert.equal(next.usedMinute, 1);
      assert.equal(next.usedDay, 4);
      assert.equal((await l.hit(bucket(), limits, t + 10)).usedMinute, 1, 'buckets are independent');
    });

    withLimiter('hitNow, where a limiter has it (in memory), counts in the same buckets as hit', async (l) => {
      if (!l.hitNow) return; // (a limiter shared across processes answers through hit only)
      const b = bucket();
      const limits = { perMinute: 3, perDay: 100 };
      const t = minuteStart();
      assert.equal(l.hitNow(b, limits, t + 1).usedMinute, 1);
      assert.equal((await l.hit(b, limits, t + 2)).usedMinute, 2);
      assert.equal(l.hitNow(b, limits, t + 3).remaining, 0);
      const over = l.hitNow(b, limits, t + 4);
      assert.deepEqual([over.allowed, over.reason, over.usedDay], [false, 'rate_limited', 3]);
    });

    withLimiter('perDay: Infinity is a minute window alone: no day count, rate_limited until the next minute', async (l) => {
      const b = bucket();
      const limits = { perMinute: 2, perDay: Infinity };
      const t = minuteStart();
      assert.equal((await l.hit(b, limits, t)).allowed, true);
      const second = await l.hit(b, limits, t + 1);
      assert.equal(second.allowed, true);
      assert.equal(second.usedDay, 0, 'no day counter is kept');
      const over = await l.hit(b, limits, t + 2);
      assert.equal(over.allowed, false);
      assert.equal(over.reason, 'rate_limited');
      assert.ok(over.retryAfterSeconds >= 1 && over.retryAfterSeconds <= 60, String(over.retryAfterSeconds));
      const next = await l.hit(b, limits, t + MINUTE_MS);
      assert.equal(next.allowed, true);
      assert.equal(next.usedMinute, 1);
    });

    withLimiter('the day quota gives quota_exceeded with retry-after until 00:00 UTC', async (l) => {
      const b = bucket();
      const limits = { perMinute: 100, perDay: 2 };
      const t = minuteStart();
      assert.equal((await l.hit(b, limits, t)).allowed, true);
      assert.equal((await l.hit(b, limits, t + MINUTE_MS)).allowed, true);
      const r = await l.hit(b, limits, t + 2 * MINUTE_MS);
      assert.equal(r.allowed, false);
      assert.equal(r.reason, 'quota_exceeded');
      assert.equal(r.retryAfterSeconds, Math.ceil((DAY_MS - ((t + 2 * MINUTE_MS) % DAY_MS)) / 1000));
    });

    withLimiter('peek reports without counting', async (l) => {
      const b = bucket();
      const limits = { perMinute: 5, perDay: 10 };
      const t = minuteStart();
      assert.equal((await l.peek(b, limits, t)).usedMinute, 0);
      await l.hit(b, limits, t);
      await l.hit(b, limits, t);
      for (let i = 0; i < 3; i++) {
        const p = await l.peek(b, limits, t + 1);
        assert.equal(p.allowed, true);
        assert.equal(p.usedMinute, 2);
        assert.equal(p.usedDay, 2);
        assert.equal(p.remaining, 3);
      }
    });

    withLimiter('parallel hits admit exactly the limit', async (l) => {
      const b = bucket();
      const limits = { perMinute: 10, perDay: 1000 };
      const t = minuteStart();
      const res = await Promise.all(Array.from({ length: 40 }, () => l.hit(b, limits, t)));
      assert.equal(res.filter((r) => r.allowed).length, 10);
    });

    withLimiter('wait slots: at most max, released slots free, a lease not released frees itself', async (l) => {
      const b = bucket();
      const t = Date.now();
      const lease = 30_000;
      const r1 = await l.acquireWait(b, 2, lease, t);
      const r2 = await l.acquireWait(b, 2, lease, t);
      assert.ok(r1 && r2);
      assert.equal(await l.acquireWait(b, 2, lease, t), null);
      assert.ok(await l.acquireWait(bucket(), 2, lease, t), 'buckets are independent');
      await r1!();
      await r1!(); // releasing twice frees one slot only
      const r3 = await l.acquireWait(b, 2, lease, t + 1);
      assert.ok(r3);
      assert.equal(await l.acquireWait(b, 2, lease, t + 2), null);
      const later = await l.acquireWait(b, 2, lease, t + lease + 1); // r2 and r3 were never released (a crashed node)
      assert.ok(later);
      assert.ok(await l.acquireWait(b, 2, lease, t + lease + 1));
      assert.equal(await l.acquireWait(b, 2, lease, t + lease + 2), null);
      assert.equal(await l.acquireWait(bucket(), 0, lease, t), null, 'max 0 admits none');
    });

    withLimiter('take: at most max uses per bucket in a sliding window, atomically; a refusal counts nothing and says when the oldest frees', async (l) => {
      // the keys an IP mints (3 per 24 hours): moved here from the store suite, the same checks
      const now = Date.now();
      const b = bucket();
      assert.deepEqual(await l.take(b, 3, DAY_MS, now - 5000), { ok: true });
      assert.deepEqual(await l.take(b, 3, DAY_MS, now - 3000), { ok: true });
      assert.deepEqual(await l.take(b, 3, DAY_MS, now), { ok: true });
      const refused = await l.take(b, 3, DAY_MS, now + 1000);
      assert.deepEqual(refused, { ok: false, retryAfterMs: DAY_MS - 6000 }, 'the oldest of the window frees first');
      assert.deepEqual(await l.take(bucket(), 3, DAY_MS, now), { ok: true }, 'other buckets are independent');
      assert.deepEqual(await l.take(b, 3, DAY_MS, now - 5000 + DAY_MS), { ok: true }, 'a use frees after the window (and the refused one was not counted)');
      assert.deepEqual(await l.take(b, 3, DAY_MS, now - 5000 + DAY_MS), { ok: false, retryAfterMs: 2000 }, 'full again: the use at now - 3000 frees next');

      const par = bucket();
      const results = await Promise.all(Array.from({ length: 12 }, () => l.take(par, 3, DAY_MS, now)));
      assert.equal(results.filter((r) => r.ok).length, 3, 'parallel takes never exceed the limit');
      assert.ok(results.filter((r) => !r.ok).every((r) => !r.ok && r.retryAfterMs === DAY_MS));
      assert.deepEqual(await l.take(bucket(), 0, DAY_MS, now), { ok: false, retryAfterMs: DAY_MS }, 'max 0 admits none');
    });

    withLimiter('parallel acquisitions take exactly max slots', async (l) => {
      const b = bucket();
      const t = Date.now();
      const got = await Promise.all(Array.from({ length: 20 }, () => l.acquireWait(b, 5, 30_000, t)));
      assert.equal(got.filter(Boolean).length, 5);
      await Promise.all(got.map((r) => r?.()));
      assert.ok(await l.acquireWait(b, 5, 30_000, t));
    });
  });
  if (harness.cleanup && !harness.skip) it(`${name}: cleanup`, async () => harness.cleanup!());
}
