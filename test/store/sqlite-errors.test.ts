// SQLite failures reach callers as the Store seam's typed errors, never as SQLITE_* codes.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { newEmail } from '../conformance/harness.ts';
import { StoreFullError, StoreUnavailableError } from '../../src/domain/errors.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { typedStoreError } from '../../src/store/sqlite/errors.ts';

const sqliteError = (code: string) => Object.assign(new Error(`${code}: x`), { code });

test('a full database or disk is StoreFullError; other SQLite failures StoreUnavailableError; the rest unchanged', () => {
  assert.ok(typedStoreError(sqliteError('SQLITE_FULL')) instanceof StoreFullError);
  assert.ok(typedStoreError(sqliteError('ENOSPC')) instanceof StoreFullError);
  for (const code of ['SQLITE_BUSY', 'SQLITE_IOERR', 'SQLITE_CORRUPT']) {
    const e = typedStoreError(sqliteError(code));
    assert.ok(e instanceof StoreUnavailableError && !(e instanceof StoreFullError), code);
  }
  const plain = new TypeError('a bug');
  assert.equal(typedStoreError(plain), plain, 'a programming error is not dressed up as a store fault');
  assert.ok(typedStoreError(plain, false) instanceof StoreUnavailableError, 'anything on a closed database is unavailability');
});

test('after close, every operation rejects with StoreUnavailableError', async () => {
  const store = createSqliteStore(':memory:');
  await store.close();
  for (const op of [() => store.ping(), () => store.listEmails('a@x.test', { limit: 1 }, Date.now()), () => store.getEmail('019a0000-0000-7000-8000-000000000000', Date.now()), () => store.webhooks.claim(Date.now(), 1000, 1)]) {
    await assert.rejects(op(), (e: unknown) => e instanceof StoreUnavailableError);
  }
});

test('keys added and revoked on the main connection while the writer thread commits mail: none fails (BEGIN IMMEDIATE, not a deferred read-then-write)', { timeout: 60_000 }, async () => {
  // A deferred transaction that reads, then writes, fails at once with SQLITE_BUSY when the writer
  // thread committed in between (busy_timeout does not wait that out): a key mint answered 500
  // "store unreachable" under ingest load. (The per-IP count moved to the limiter; a revocation
  // still reads, then writes.)
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-busy-'));
  const store = createSqliteStore(join(dir, 'busy.db'));
  try {
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) await store.addEmails(Array.from({ length: 20 }, (_, j) => newEmail(`busy${(i * 20 + j) % 50}@ephemail.test`)));
    })();
    const failures: string[] = [];
    const deadline = Date.now() + 2500;
    let mints = 0;
    while (Date.now() < deadline) {
      const n = mints++;
      const key = { hash: createHash('sha256').update(String(n)).digest('hex'), prefix: `eph_${String(n).padStart(8, '0')}`, label: '', contactEmail: null, createdAt: Date.now(), revokedAt: null };
      await store.addKey(key).catch((e: Error) => failures.push(e.message));
      await store.revokeKeys(key.prefix, Date.now()).catch((e: Error) => failures.push(e.message));
      await new Promise((r) => setImmediate(r));
    }
    writing = false;
    await writer;
    assert.ok(mints > 200, `${mints} mints`);
    assert.equal(failures.length, 0, `${failures.length} of ${mints} mints failed: ${[...new Set(failures)].join('; ')}`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
