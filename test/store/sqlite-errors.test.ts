// SQLite failures reach callers as the Store seam's typed errors, never as SQLITE_* codes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
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
