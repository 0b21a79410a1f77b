// The wait registry behind `wait`, check_inbox and the event streams (src/services/wait.ts), without
// HTTP: one bus subscription per address for held waits and watchers together, re-queries after one
// delivery shared between waits with the same key (each getting an array of its own), separate for
// different keys, and everything released after.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMemoryBus } from '../../src/bus/memory.ts';
import type { Bus } from '../../src/bus/bus.ts';
import { createWaitRegistry } from '../../src/services/wait.ts';

/** A memory bus that counts live subscriptions per address. */
function countingBus() {
  const inner = createMemoryBus();
  const live = new Map<string, number>();
  const bus: Bus = {
    capabilities: inner.capabilities,
    publish: (a, id) => inner.publish(a, id),
    subscribe(a, fn) {
      live.set(a, (live.get(a) ?? 0) + 1);
      const off = inner.subscribe(a, fn);
      return () => {
        live.set(a, live.get(a)! - 1);
        off();
      };
    },
    close: () => inner.close(),
  };
  return { bus, live };
}

const tick = () => new Promise((r) => setImmediate(r));

test('waits on one address share one subscription and, per key, one re-query per delivery', async () => {
  const { bus, live } = countingBus();
  const waits = createWaitRegistry(bus);
  let stored: string[] = [];
  const calls = { a: 0, b: 0 };
  const query = (k: 'a' | 'b') => async () => {
    calls[k]++;
    return stored.slice();
  };
  const held = [
    ...[1, 2, 3].map(() => waits.hold('x@ephemail.test', 5000, query('a'), undefined, 'page-a')),
    ...[1, 2].map(() => waits.hold('x@ephemail.test', 5000, query('b'), undefined, 'page-b')),
  ];
  await tick();
  assert.equal(waits.held, 5);
  assert.equal(live.get('x@ephemail.test'), 1, 'one subscription for the address');
  assert.deepEqual(calls, { a: 3, b: 2 }, 'the first query of each wait is its own');
  stored = ['m1'];
  await bus.publish('x@ephemail.test', 'm1');
  const results = await Promise.all(held);
  assert.deepEqual(calls, { a: 4, b: 3 }, 'one re-query per key after the delivery');
  for (const r of results) assert.deepEqual(r, { result: ['m1'], waited: true });
  assert.equal(new Set(results.map((r) => r.result)).size, 5, 'every wait has an array of its own');
  assert.equal(waits.held, 0);
  assert.equal(live.get('x@ephemail.test'), 0, 'unsubscribed once the last wait ended');
});

test('without a key each wait re-queries; a wait that ends (abort) leaves the others held', async () => {
  const { bus, live } = countingBus();
  const waits = createWaitRegistry(bus);
  let stored: number[] = [];
  let calls = 0;
  const query = async () => {
    calls++;
    return stored.slice();
  };
  const abort = new AbortController();
  const a = waits.hold('y@ephemail.test', 5000, query, abort.signal);
  const b = waits.hold('y@ephemail.test', 5000, query);
  await tick();
  abort.abort();
  assert.deepEqual(await a, { result: [], waited: true });
  assert.equal(waits.held, 1);
  assert.equal(live.get('y@ephemail.test'), 1);
  // a delivery that finds nothing new keeps the wait held
  await bus.publish('y@ephemail.test', 'nothing');
  await tick();
  assert.equal(waits.held, 1);
  stored = [7];
  await bus.publish('y@ephemail.test', 'm7');
  assert.deepEqual(await b, { result: [7], waited: true });
  assert.equal(calls, 4, 'a: 1; b: 1 + one per delivery');
  assert.equal(live.get('y@ephemail.test'), 0);
});

test('a failing shared re-query fails every wait that took it, and the next delivery queries again', async () => {
  const { bus } = countingBus();
  const waits = createWaitRegistry(bus);
  let fail = false;
  let stored: number[] = [];
  const query = async () => {
    if (fail) throw new Error('store down');
    return stored.slice();
  };
  const held = [1, 2].map(() => waits.hold('z@ephemail.test', 5000, query, undefined, 'k').then((r) => r, (e: Error) => e.message));
  await tick();
  fail = true;
  await bus.publish('z@ephemail.test', 'm');
  assert.deepEqual(await Promise.all(held), ['store down', 'store down']);
  fail = false;
  stored = [1];
  const again = waits.hold('z@ephemail.test', 5000, query, undefined, 'k');
  await tick();
  await bus.publish('z@ephemail.test', 'm2');
  assert.deepEqual(await again, { result: [1], waited: false }, 'mail already there: answered by its first query');
});

test('releaseAll answers held waits with their empty result; later holds do not wait', async () => {
  const { bus } = countingBus();
  const waits = createWaitRegistry(bus);
  const h = waits.hold('w@ephemail.test', 30_000, async () => [] as number[], undefined, 'k');
  await tick();
  waits.releaseAll();
  assert.deepEqual(await h, { result: [], waited: true });
  assert.deepEqual(await waits.hold('w@ephemail.test', 30_000, async () => [] as number[]), { result: [], waited: false });
});

test('watchers and held waits of one address share its one subscription; each is told of every delivery', async () => {
  const { bus, live } = countingBus();
  const waits = createWaitRegistry(bus);
  const told: string[] = [];
  const stopA = waits.watch('v@ephemail.test', () => told.push('a'));
  const stopB = waits.watch('v@ephemail.test', () => told.push('b'));
  let stored: number[] = [];
  const h = waits.hold('v@ephemail.test', 5000, async () => stored.slice());
  await tick();
  assert.equal(live.get('v@ephemail.test'), 1, 'one subscription for two watchers and a held wait');
  assert.equal(waits.held, 1, 'watchers are not held waits');
  stored = [1];
  await bus.publish('v@ephemail.test', 'm1');
  assert.deepEqual(await h, { result: [1], waited: true });
  assert.deepEqual(told, ['a', 'b']);
  stopA();
  stopA(); // idempotent: b stays
  await bus.publish('v@ephemail.test', 'm2');
  assert.deepEqual(told, ['a', 'b', 'b']);
  assert.equal(live.get('v@ephemail.test'), 1);
  stopB();
  assert.equal(live.get('v@ephemail.test'), 0, 'unsubscribed once the last listener left');
  await bus.publish('v@ephemail.test', 'm3');
  assert.deepEqual(told, ['a', 'b', 'b']);
  // shutdown answers held waits; a watcher is its stream's to close, and still told until then
  const stopC = waits.watch('v@ephemail.test', () => told.push('c'));
  waits.releaseAll();
  await bus.publish('v@ephemail.test', 'm4');
  assert.deepEqual(told, ['a', 'b', 'b', 'c']);
  stopC();
});
