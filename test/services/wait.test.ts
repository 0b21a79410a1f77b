// The one wait path with injected time: a hold ends exactly at its deadline on a fake clock, wakes
// on a delivery before it, and withWaitSlot refuses past the caller's slots and frees them after.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { AppError } from '../../src/domain/errors.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { createWaitRegistry, withWaitSlot, type Timers } from '../../src/services/wait.ts';

/** A clock and timers that move only when told. */
function fakeTime(start = 1_000_000) {
  let now = start;
  const pending = new Set<{ at: number; fn: () => void }>();
  const timers: Timers = {
    setTimeout(fn, ms) {
      const t = { at: now + ms, fn };
      pending.add(t);
      return t;
    },
    clearTimeout(h) {
      pending.delete(h as { at: number; fn: () => void });
    },
  };
  return {
    clock: { now: () => now },
    timers,
    async advance(ms: number) {
      now += ms;
      for (const t of [...pending]) if (t.at <= now) { pending.delete(t); t.fn(); }
      for (let i = 0; i < 5; i++) await Promise.resolve();
    },
  };
}

const settled = async (p: Promise<unknown>) => {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

test('a hold with nothing to find ends at its deadline, not a millisecond before', async () => {
  const t = fakeTime();
  const waits = createWaitRegistry(createMemoryBus(), { clock: t.clock, timers: t.timers });
  const held = waits.hold('a@x.test', 30_000, async () => [] as string[]);
  assert.equal(await settled(held), false); // it queried, found nothing, and holds
  await t.advance(29_999);
  assert.equal(await settled(held), false);
  assert.equal(waits.held, 1);
  await t.advance(1);
  assert.deepEqual(await held, { result: [], waited: true });
  assert.equal(waits.held, 0);
});

test('a delivery before the deadline wakes the hold with the new result', async () => {
  const t = fakeTime();
  const bus = createMemoryBus();
  const waits = createWaitRegistry(bus, { clock: t.clock, timers: t.timers });
  let stored: string[] = [];
  const held = waits.hold('b@x.test', 30_000, async () => stored);
  assert.equal(await settled(held), false);
  await t.advance(10_000);
  stored = ['id-1'];
  bus.deliverLocal('b@x.test', 'id-1');
  assert.deepEqual(await held, { result: ['id-1'], waited: true });
});

test('withWaitSlot: the caller\'s slots are taken while the run lasts and refused past the limit', async () => {
  const t = fakeTime();
  const limiter = createMemoryLimiter();
  const slots = { bucket: 'key:k', max: 2, refusal: 'two at most' };
  let open: (() => void)[] = [];
  const hold = () => withWaitSlot(limiter, t.clock, slots, 30_000, () => new Promise<void>((r) => open.push(r)));
  const a = hold();
  const b = hold();
  await Promise.resolve();
  await assert.rejects(hold(), (err: unknown) => err instanceof AppError && err.type === 'too_many_waiters' && err.message === 'two at most');
  open[0]();
  await a;
  const c = hold(); // a slot came back
  for (let i = 0; i < 5; i++) await Promise.resolve();
  assert.equal(open.length, 3);
  open.forEach((r) => r());
  open = [];
  await Promise.all([b, c]);
  await limiter.close();
});
