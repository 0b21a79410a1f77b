// Who derives next (services/derive-queue.ts, the one scheduler of derivation work): classes in order,
// callers in turn, caps per caller (and per second owner) and for low classes, a bound on what one
// caller may leave waiting, background work yielding to a burst of ingest.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AppError } from '../../src/domain/errors.ts';
import { createBurstGauge, createDeriveQueue, type Priority } from '../../src/services/derive-queue.ts';
import { until } from '../helpers/time.ts';

function harness(slots = 2, options = {}) {
  const q = createDeriveQueue({ slots, ...options });
  const started: string[] = [];
  const release = new Map<string, () => void>();
  const add = (name: string, owner: string, priority: Priority) =>
    q.enqueue(owner, priority, () => new Promise<string>((resolve) => {
      started.push(name);
      release.set(name, () => resolve(name));
    }));
  const done = async (name: string, ticket: { promise: Promise<string> }) => {
    release.get(name)!();
    assert.equal(await ticket.promise, name);
  };
  return { q, started, add, done };
}

test('callers take turns within a class; a caller never holds every worker', async () => {
  const { q, started, add, done } = harness(3);
  const a = ['a1', 'a2', 'a3', 'a4'].map((n) => add(n, 'A', 'read'));
  const b = ['b1', 'b2'].map((n) => add(n, 'B', 'read'));
  assert.deepEqual(started, ['a1', 'a2', 'b1'], 'A holds at most slots - 1 = 2');
  assert.equal(q.running, 3);
  assert.equal(q.waiting, 3);
  await done('a1', a[0]);
  assert.deepEqual(started.at(-1), 'a3', 'A is first in the round and below its cap again');
  await done('b1', b[0]);
  assert.deepEqual(started.at(-1), 'b2');
  for (const [i, n] of ['a2', 'a3'].entries()) await done(n, a[i + 1]);
  assert.deepEqual(started.at(-1), 'a4');
});

test('list and background work never take the last worker; reads go first; promotion moves a waiting job up', async () => {
  const { started, add, done } = harness(2);
  const l1 = add('l1', 'A', 'list');
  const l2 = add('l2', 'B', 'list');
  const g1 = add('g1', 'S', 'background');
  assert.deepEqual(started, ['l1'], 'one low job at a time with two workers');
  const r1 = add('r1', 'C', 'read');
  assert.deepEqual(started, ['l1', 'r1']);
  const r2 = add('r2', 'D', 'read');
  g1.promote('E', 'read');
  await done('r1', r1);
  assert.deepEqual(started.at(-1), 'r2', 'a read before the list');
  await done('r2', r2);
  assert.deepEqual(started.at(-1), 'g1', 'the promoted background job is a read now');
  await done('l1', l1);
  assert.deepEqual(started.at(-1), 'l2');
  await done('g1', g1);
  await done('l2', l2);
});

test('one caller may leave at most maxWaitingPerOwner waiting; drain starts everything', async () => {
  const { q, started, add } = harness(1, { maxWaitingPerOwner: 3 });
  const tickets = ['x1', 'x2', 'x3', 'x4'].map((n) => add(n, 'X', 'read'));
  const over = add('x5', 'X', 'read');
  await assert.rejects(over.promise, (e: unknown) => e instanceof AppError && e.type === 'rate_limited' && e.retryAfter === 1);
  assert.equal(q.waiting, 3);
  add('y1', 'Y', 'read'); // another caller is not refused
  q.drain();
  assert.deepEqual(started, ['x1', 'x2', 'y1', 'x3', 'x4'], 'in turn, without limits');
  assert.equal(q.waiting, 0);
  assert.equal(tickets.length, 4);
});

/** Jobs submitted without a promise (the verdicts' way): `release(name)` ends one. */
function submitted(options: Parameters<typeof createDeriveQueue>[0]) {
  let settled = 0;
  const q = createDeriveQueue({ ...options, onSettled: () => settled++ });
  const started: string[] = [];
  const release = new Map<string, () => void>();
  const submit = (name: string, owner: string, priority: Priority, also: string | null = null) =>
    q.submit(owner, priority, () => new Promise<void>((resolve) => {
      started.push(name);
      release.set(name, resolve);
    }), also);
  const end = async (name: string) => {
    release.get(name)!();
    await new Promise((next) => setImmediate(next)); // the job's end is handled in the microtasks before this turn
  };
  return { q, started, submit, end, settledCount: () => settled };
}

test('a job counts against a second owner too: at most perOwner per client and per domain, others pass it over', async () => {
  const { q, started, submit, end, settledCount } = submitted({ slots: 16, perOwner: 2, lowSlots: 16 });
  for (let i = 1; i <= 4; i++) submit(`c${i}`, `client${i}`, 'background', 'domain-x');
  submit('d1', 'client9', 'background', 'domain-y');
  submit('e1', 'client1', 'background', 'domain-z');
  assert.deepEqual(started, ['c1', 'c2', 'd1', 'e1'], 'domain-x holds two: the others of it wait, client1\'s next of another domain runs');
  assert.equal(q.waiting, 2);
  await end('c1');
  assert.deepEqual(started, ['c1', 'c2', 'd1', 'e1', 'c3'], 'domain-x has room again: the next client in turn');
  assert.equal(settledCount(), 1);
  q.submit('r:1', 'read', async () => void started.push('read'));
  assert.equal(started.at(-1), 'read', 'a read is not held back by the senders\' caps');
  q.clear();
  assert.equal(q.waiting, 0, 'cleared: the waiting jobs never run');
});

test('while ingest is in a burst, background work waits and is looked at again; reads do not wait', async () => {
  let busy = true;
  const { q, started, submit } = submitted({ slots: 4, lowSlots: 4, busy: () => busy, busyRetryMs: 20 });
  submit('g1', 'A', 'background');
  submit('r1', 'B', 'read');
  assert.deepEqual(started, ['r1']);
  assert.equal(q.waiting, 1);
  busy = false;
  await until(() => started.includes('g1'), 'the background job starts once the burst is over');
  q.clear();
});

test('the burst gauge: busy past `messages` in the current or the previous window, quiet after two', () => {
  let t = 1000;
  const g = createBurstGauge({ windowMs: 100, messages: 3, monotonic: () => t });
  for (let i = 0; i < 3; i++) g.arrived();
  assert.equal(g.busy(), false, 'three in a window is not a burst');
  g.arrived();
  assert.equal(g.busy(), true);
  t += 150;
  assert.equal(g.busy(), true, 'the window just past still counts');
  g.arrived();
  assert.equal(g.busy(), true, 'the previous window had four');
  t += 200;
  assert.equal(g.busy(), false, 'two quiet windows');
});
