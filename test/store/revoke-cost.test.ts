// Revoking a key on SQLite reads a range of the prefix index, never every key (issue 35 finding 11):
// the query's plan searches api_keys_by_prefix; and it still matches exactly the keys whose prefix
// starts with the one given.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { REVOKABLE_SQL } from '../../src/store/sqlite/keys.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';

test('the revocation\'s query searches the prefix index (no scan of every key)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-revoke-'));
  // the store's own schema (its migrations), read through a connection of the test's
  await createSqliteStore(join(dir, 'keys.db')).close();
  const db = new Database(join(dir, 'keys.db'));
  try {
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${REVOKABLE_SQL}`).all({ prefix: 'eph_abc12345' }) as { detail: string }[]).map((r) => r.detail);
    assert.ok(plan.some((d) => /SEARCH k USING INDEX api_keys_by_prefix \(prefix>\? AND prefix<\?\)/.test(d)), plan.join('\n'));
    assert.ok(!plan.some((d) => /SCAN k\b/.test(d)), plan.join('\n'));
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a prefix matches the keys that start with it, and only those', async () => {
  const store = createSqliteStore(':memory:');
  try {
    const now = Date.now();
    for (const [i, prefix] of ['eph_ab', 'eph_abc12345', 'eph_abd12345', 'eph_ac012345', 'eph_aa012345'].entries()) {
      await store.addKey({ hash: String(i).repeat(64), prefix, label: '', contactEmail: null, createdAt: now + i });
    }
    assert.deepEqual((await store.revokeKeys('eph_ab', now)).map((k) => k.prefix).sort(), ['eph_ab', 'eph_abc12345', 'eph_abd12345']);
    assert.deepEqual((await store.revokeKeys('eph_ac012345', now)).map((k) => k.prefix), ['eph_ac012345']);
    assert.deepEqual(await store.revokeKeys('eph_a', now + 1).then((r) => r.map((k) => k.prefix)), ['eph_aa012345']);
  } finally {
    await store.close();
  }
});
