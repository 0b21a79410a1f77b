// The SQLite store's list cache (store/sqlite/caches.ts): exact within its second, and bounded by
// the characters it holds, not only by its number of entries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createListCache } from '../../src/store/sqlite/caches.ts';
import type { EmailSummary } from '../../src/store/store.ts';

const row = (i: number, subject: string): EmailSummary => ({
  id: `0190d5b0-0000-7000-8000-${String(i).padStart(12, '0')}`, address: `a${i}@ephemail.test`, sender: 's@example.org', mailedBy: null,
  subject, hasAttachments: false, receivedAt: 0, expiresAt: 10_000,
});

test('answers a repeated query within its second, then forgets; forget() drops an address', () => {
  const c = createListCache();
  c.put('a@x', 'k', 100, [row(1, 'hi')]);
  assert.equal(c.get('a@x', 'k', 500)?.[0].subject, 'hi');
  assert.equal(c.get('a@x', 'k', 1100), null, 'a second later it reads again');
  assert.equal(c.get('a@x', 'k', 50), null, 'never for an earlier now');
  c.forget('a@x');
  assert.equal(c.get('a@x', 'k', 500), null);
  assert.equal(c.chars, 0);
});

test('bounded by characters: pages of 1,000-character subjects never hold more than 16 M characters', () => {
  const c = createListCache();
  const page = Array.from({ length: 100 }, (_, i) => row(i, 'x'.repeat(1000)));
  for (let a = 0; a < 500; a++) c.put(`a${a}@x`, 'k', 0, page);
  assert.ok(c.chars <= 16 * 1024 * 1024, `${c.chars} characters held`);
  assert.ok(c.chars > 0);
});
