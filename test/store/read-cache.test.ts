// The read cache (store/read-cache.ts) over a real SQLite store: its one staleness rule (at most
// 250 ms, never past an expiry, own writes seen at once), its byte bound, and read-through of emails
// over a store shared across processes. The shared mail and key suites run it too (test/conformance).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { withReadCache } from '../../src/store/read-cache.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import type { KeyRecord } from '../../src/store/keys.ts';
import type { Store } from '../../src/store/store.ts';
import { inbox, newEmail } from '../conformance/harness.ts';

const HOUR = 3_600_000;

/** A real store whose reads are counted, and optionally held until released. */
function counted(inner: Store, shared = false) {
  const reads = { listEmails: 0, getEmail: 0, findKey: 0 };
  let gate: Promise<void> | null = null;
  const store = Object.create(inner) as Store;
  const capabilities = { ...inner.capabilities, sharedAcrossProcesses: shared };
  Object.defineProperty(store, 'capabilities', { value: capabilities });
  for (const op of ['listEmails', 'getEmail', 'findKey'] as const) {
    const fn = (inner[op] as (...a: unknown[]) => Promise<unknown>).bind(inner);
    (store as unknown as Record<string, unknown>)[op] = async (...args: unknown[]) => {
      reads[op]++;
      const v = await fn(...args);
      if (gate) await gate;
      return v;
    };
  }
  return {
    store,
    reads,
    /** Reads started from now on answer only once `release` is called (with what they read before). */
    hold() {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return () => {
        gate = null;
        release();
      };
    },
  };
}

const keyRecord = (hash: string, now: number): KeyRecord => ({ hash, prefix: 'eph_abcdefgh', label: 'ci', contactEmail: null, createdAt: now, revokedAt: null, lastUsedAt: null });

test('a repeated list answers from memory, and a write through the cache is seen at once', async () => {
  const inner = createSqliteStore(':memory:');
  const c = counted(inner);
  const store = withReadCache(c.store);
  try {
    const a = inbox();
    const now = Date.now();
    await store.addEmails([newEmail(a, { subject: 'first', expiresAt: now + HOUR })]);
    for (let i = 0; i < 5; i++) assert.equal((await store.listEmails(a, { limit: 10 }, now)).length, 1);
    assert.equal(c.reads.listEmails, 1, 'the backend was read once for five identical lists');
    await store.addEmails([newEmail(a, { subject: 'second', expiresAt: now + HOUR })]);
    assert.deepEqual((await store.listEmails(a, { limit: 10 }, now)).map((e) => e.subject), ['second', 'first']);
    const [first] = await store.listEmails(a, { limit: 1, before: (await store.listEmails(a, { limit: 10 }, now))[0].id }, now);
    assert.equal(first.subject, 'first');
    assert.equal((await store.getEmail(first.id, now))?.subject, 'first');
    await store.getEmail(first.id, now);
    assert.equal(c.reads.getEmail, 2, 'rows by id are read through (the read model keeps answers, services/answers.ts)');
    assert.equal(await store.deleteEmail(first.id, now), true);
    assert.deepEqual((await store.listEmails(a, { limit: 10 }, now)).map((e) => e.subject), ['second'], 'a delete is seen at once');
    assert.equal(await store.getEmail(first.id, now), null);
    assert.equal(await store.purgeInbox(a, now), 1);
    assert.deepEqual(await store.listEmails(a, { limit: 10 }, now), [], 'a purge is seen at once');
  } finally {
    await store.close();
  }
});

test('a write made elsewhere shows within 250 ms: a key revoked behind the cache', async () => {
  let t = 0;
  const inner = createSqliteStore(':memory:');
  const c = counted(inner);
  const store = withReadCache(c.store, { clock: () => t });
  try {
    const now = Date.now();
    const hash = 'a'.repeat(64);
    await store.addKey(keyRecord(hash, now));
    assert.equal((await store.findKey(hash))?.revokedAt, null);
    await inner.revokeKeys('eph_abcdefgh', now); // another process (the operator's CLI)
    t = 249;
    assert.equal((await store.findKey(hash))?.revokedAt, null, 'still the cached record within 250 ms');
    assert.equal(store.peekKey?.(hash)?.revokedAt, null, 'peekKey: the record at hand, under the same rule');
    assert.equal(c.reads.findKey, 1);
    t = 250;
    assert.equal(store.peekKey?.(hash), undefined, 'peekKey: nothing at hand at 250 ms (ask findKey)');
    assert.equal((await store.findKey(hash))?.revokedAt, now, 'read again at 250 ms');
    // the same revocation through the cache is seen at once
    const other = 'b'.repeat(64);
    await store.addKey({ ...keyRecord(other, now), prefix: 'eph_zzzzzzzz' });
    assert.equal((await store.findKey(other))?.revokedAt, null);
    await store.revokeKeys('eph_zzzzzzzz', now);
    assert.equal(store.peekKey?.(other), undefined, 'a revocation through the cache forgets the record at once');
    assert.equal((await store.findKey(other))?.revokedAt, now);
  } finally {
    await store.close();
  }
});

test('never past an expiry, never for an earlier now, and a sweep forgets what it deleted', async () => {
  const store = withReadCache(createSqliteStore(':memory:'), { clock: () => 0 });
  try {
    const a = inbox();
    const now = Date.now();
    const [short] = await store.addEmails([newEmail(a, { expiresAt: now + 10 }), newEmail(a, { expiresAt: now + HOUR })]);
    assert.equal((await store.listEmails(a, { limit: 10 }, now)).length, 2);
    assert.ok(await store.getEmail(short.id, now));
    assert.equal((await store.listEmails(a, { limit: 10 }, now + 10)).length, 1, 'the expired email is gone from the list');
    assert.equal(await store.getEmail(short.id, now + 10), null, 'and from reads by id');
    assert.equal((await store.listEmails(a, { limit: 10 }, now - 1)).length, 2, 'an earlier now reads again');
    assert.equal(await store.sweepExpired(now + 10), 1);
    assert.equal(await store.getEmail(short.id, now), null, 'swept for good, even for an earlier now');
    assert.equal((await store.listEmails(a, { limit: 10 }, now)).length, 1);
  } finally {
    await store.close();
  }
});

test('a read that overlapped a write does not keep what it read', async () => {
  const inner = createSqliteStore(':memory:');
  const c = counted(inner);
  const store = withReadCache(c.store, { clock: () => 0 });
  try {
    const a = inbox();
    const now = Date.now();
    const release = c.hold();
    const before = store.listEmails(a, { limit: 10 }, now); // reads the empty inbox, answers later
    await store.addEmails([newEmail(a, { expiresAt: now + HOUR })]);
    release();
    assert.equal((await before).length, 0);
    assert.equal((await store.listEmails(a, { limit: 10 }, now)).length, 1, 'the late answer was not kept');
  } finally {
    await store.close();
  }
});

test('bounded by bytes: lists of 1,000-character subjects never hold more than the budget', async () => {
  const maxBytes = 1024 * 1024;
  const store = withReadCache(createSqliteStore(':memory:'), { maxBytes, clock: () => 0 });
  try {
    const now = Date.now();
    const addresses = Array.from({ length: 60 }, () => inbox());
    for (const a of addresses) await store.addEmails(Array.from({ length: 20 }, () => newEmail(a, { subject: 'x'.repeat(1000), expiresAt: now + HOUR })));
    for (const a of addresses) assert.equal((await store.listEmails(a, { limit: 20 }, now)).length, 20);
    const { bytes, entries } = store.cacheStats;
    assert.ok(bytes <= maxBytes, `${bytes} bytes held`);
    assert.ok(entries >= 10 && entries < 60, `${entries} lists held: the oldest went first`);
    // the newest list is still answered from memory, the oldest is read again and answers right
    assert.equal((await store.listEmails(addresses[0], { limit: 20 }, now)).length, 20);
  } finally {
    await store.close();
  }
});

test('bounded by what it really holds: the bytes it counts for list pages are at least the heap they take', async () => {
  // the collector, reached as src/idle-compact.ts reaches it (no --expose-gc needed)
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const store = withReadCache(createSqliteStore(':memory:'), { maxBytes: 1024 * 1024 * 1024, clock: () => 0 });
  try {
    const now = Date.now();
    // short fields (the fixed cost of a row dominates) and the usual ones
    const addresses = Array.from({ length: 400 }, () => inbox());
    for (const [i, a] of addresses.entries()) {
      const over = i % 2 ? { sender: '', subject: '', mailedBy: null } : { sender: 'Sender <news@sender.example>', subject: 'Your code is 123456' };
      await store.addEmails(Array.from({ length: 25 }, () => newEmail(a, { ...over, expiresAt: now + HOUR })));
    }
    const pages: unknown[] = [];
    gc();
    const before = process.memoryUsage().heapUsed;
    for (const a of addresses) pages.push(await store.listEmails(a, { limit: 25 }, now));
    gc();
    const held = process.memoryUsage().heapUsed - before;
    const { bytes, entries } = store.cacheStats;
    assert.equal(entries, addresses.length);
    assert.ok(bytes >= held, `${bytes} bytes counted for ${entries} pages of 25 rows that take ${held} bytes of heap`);
    assert.equal(pages.length, addresses.length);
  } finally {
    await store.close();
  }
});

test('over a store shared across processes, emails are read through and only keys are cached', async () => {
  const inner = createSqliteStore(':memory:');
  const c = counted(inner, true);
  const store = withReadCache(c.store, { clock: () => 0 });
  try {
    const a = inbox();
    const now = Date.now();
    const [e] = await store.addEmails([newEmail(a, { expiresAt: now + HOUR })]);
    await store.listEmails(a, { limit: 10 }, now);
    await store.listEmails(a, { limit: 10 }, now);
    await store.getEmail(e.id, now);
    await store.getEmail(e.id, now);
    assert.deepEqual([c.reads.listEmails, c.reads.getEmail], [2, 2], 'another node may have written: read every time');
    const hash = 'c'.repeat(64);
    await store.addKey(keyRecord(hash, now));
    await store.findKey(hash);
    await store.findKey(hash);
    assert.equal(c.reads.findKey, 1);
  } finally {
    await store.close();
  }
});
