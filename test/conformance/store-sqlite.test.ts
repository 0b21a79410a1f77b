// Every store seam's conformance suite (mail, keys, webhooks, faults, domains) against the SQLite
// reference backend: in memory (commits on the main thread) and on a file (commits on the writer
// thread), plus what only a file can show: a restart.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { withReadCache } from '../../src/store/read-cache.ts';
import { migrationSql } from '../../src/store/sqlite/migrations.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { inbox, newEmail, rawMessage } from './harness.ts';
import { keySuite } from './keys.suite.ts';
import { mailSuite } from './mail.suite.ts';
import { webhookSuite } from './webhooks.suite.ts';
import { faultSuite } from './faults.suite.ts';
import { domainSuite } from './domains.suite.ts';

const dir = mkdtempSync(join(tmpdir(), 'ephemail-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

mailSuite('sqlite', { open: async () => createSqliteStore(':memory:') });
keySuite('sqlite', { open: async () => createSqliteStore(':memory:') });
webhookSuite('sqlite', { open: async () => createSqliteStore(':memory:') });
mailSuite('sqlite file', { open: async () => createSqliteStore(join(dir, `suite-${n++}.db`)) });
keySuite('sqlite file', { open: async () => createSqliteStore(join(dir, `suite-${n++}.db`)) });
// the file's event bodies, read through a second connection (the suite checks one body per email)
let webhookFile = '';
const webhookBodies = async () => {
  const db = new Database(webhookFile, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT count(*) FROM webhook_payloads').pluck().get() as number;
  } finally {
    db.close();
  }
};
webhookSuite('sqlite file', { open: async () => createSqliteStore((webhookFile = join(dir, `suite-${n++}.db`))), bodies: webhookBodies });
faultSuite('sqlite', { open: async () => createSqliteStore(':memory:') });
faultSuite('sqlite file + read cache', { open: async () => withReadCache(createSqliteStore(join(dir, `suite-${n++}.db`))) });
domainSuite('sqlite', { open: async () => createSqliteStore(':memory:') });
domainSuite('sqlite + read cache', { open: async () => withReadCache(createSqliteStore(join(dir, `suite-${n++}.db`))) });
// the service runs every store behind its read cache: the cached store is held to the same suite
mailSuite('sqlite + read cache', { open: async () => withReadCache(createSqliteStore(':memory:')) });
keySuite('sqlite + read cache', { open: async () => withReadCache(createSqliteStore(':memory:')) });
mailSuite('sqlite file + read cache', { open: async () => withReadCache(createSqliteStore(join(dir, `suite-${n++}.db`))) });
keySuite('sqlite file + read cache', { open: async () => withReadCache(createSqliteStore(join(dir, `suite-${n++}.db`))) });

async function bytesOf(chunks: AsyncIterable<Uint8Array> | undefined): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks ?? []) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

test('sqlite file: a restart keeps rows, the shared message and its views; the last delete after it frees the message', async () => {
  const path = join(dir, 'restart.db');
  const now = Date.now();
  const raw = rawMessage('restart');
  const [a, b] = [inbox(), inbox()];
  let store = createSqliteStore(path);
  const rows = await store.addEmails([newEmail(a, { raw }), newEmail(b, { raw })]);
  const key = (await store.getEmail(rows[0].id, now))!.messageKey;
  await store.putViews(key, '{"kept":true}', [Buffer.from('part')]);
  await store.close();

  store = createSqliteStore(path);
  try {
    assert.deepEqual((await store.listEmails(a, { limit: 10 }, now)).map((e) => e.id), [rows[0].id]);
    assert.equal((await store.getEmail(rows[1].id, now))?.messageKey, key);
    assert.ok((await bytesOf((await store.readRaw(key))?.chunks)).equals(raw));
    assert.equal(await store.getViews(key), '{"kept":true}');
    assert.equal((await bytesOf((await store.readPart(key, 0))?.chunks)).toString(), 'part');
    const [later] = await store.addEmails([newEmail(a)]);
    assert.ok(later.id > rows[1].id, 'ids keep increasing after a restart');
    assert.equal(await store.deleteEmail(rows[0].id, now), true);
    assert.ok(await store.readRaw(key), 'one copy left: kept');
    assert.equal(await store.sweepExpired(rows[1].expiresAt), 1, 'the last row of the message (the later mail lives on)');
    assert.equal(await store.readRaw(key), null, 'expired with its last row');
    assert.equal(await store.readPart(key, 0), null);
  } finally {
    await store.close();
  }
});

test('sqlite file: a database of the layout before search texts is migrated; its mail has none until given one', async () => {
  const path = join(dir, 'before-search.db');
  const now = Date.now();
  const old = new Database(path);
  for (const sql of migrationSql().slice(0, 3)) old.exec(sql);
  old.pragma('user_version = 3');
  const id = '01900000-0000-7000-8000-000000000001';
  old.prepare('INSERT INTO messages (key, raw, expires_at) VALUES (?, ?, ?)').run(id, rawMessage('old'), now + 60_000);
  old.prepare(`INSERT INTO emails (id, address, message_key, sender, mailed_by, subject, has_attachments, received_at, expires_at)
    VALUES (?, 'old@ephemail.test', ?, 's', NULL, 'old', 0, ?, ?)`).run(id, id, now, now + 60_000);
  old.close();
  const store = createSqliteStore(path);
  try {
    assert.equal((await store.listEmails('old@ephemail.test', { limit: 10 }, now)).length, 1, 'the mail is kept');
    assert.deepEqual(await store.matchText([id], 'text', now), [null], 'no search text yet');
    await store.putSearchText(id, 'text of old mail');
    assert.deepEqual(await store.matchText([id], 'old mail', now), [true]);
    const [fresh] = await store.addEmails([newEmail('old@ephemail.test', { searchText: 'new mail' })]);
    assert.deepEqual(await store.matchText([fresh.id, id], 'mail', now), [true, true]);
  } finally {
    await store.close();
  }
});

test('sqlite file: a queue of version 3 (the body in every job) is migrated: each email\'s body kept once, jobs keep their key and are delivered', async () => {
  const path = join(dir, 'v3.db');
  const old = new Database(path);
  for (const sql of migrationSql().slice(0, 3)) old.exec(sql);
  old.pragma('user_version = 3');
  old.prepare('INSERT INTO webhooks (id, key_hash, url, target, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)').run('wh_a', 'k'.repeat(64), 'https://r.example/', 'a@ephemail.test', 'whsec_x', 1);
  old.prepare('INSERT INTO webhooks (id, key_hash, url, target, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)').run('wh_b', 'j'.repeat(64), 'https://r.example/', 'a@ephemail.test', 'whsec_x', 2);
  const job = old.prepare('INSERT INTO webhook_jobs (id, webhook_id, email_id, payload, attempts, due_at, leased, expires_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)');
  job.run('msg_1', 'wh_a', 'e1', '{"email":1}', 2, 1000, 9_000_000);
  job.run('msg_2', 'wh_b', 'e1', '{"email":1}', 0, 1000, 9_000_000);
  old.close();

  const store = createSqliteStore(path);
  try {
    const claimed = await store.webhooks.claim(2000, 10_000, 10);
    assert.deepEqual(claimed.map((j) => [j.id, j.keyHash, j.payload, j.attempts]).sort(), [['msg_1', 'k'.repeat(64), '{"email":1}', 2], ['msg_2', 'j'.repeat(64), '{"email":1}', 0]]);
    const bodies = () => {
      const db = new Database(path, { readonly: true });
      try {
        return db.prepare('SELECT count(*) FROM webhook_payloads').pluck().get();
      } finally {
        db.close();
      }
    };
    assert.equal(bodies(), 1, 'one body for the email, not one per job');
    for (const j of claimed) await store.webhooks.finish(j, j.webhookId, { jobId: j.id, emailId: j.emailId, attempt: j.attempts + 1, at: 2000, status: 'delivered', responseCode: 200, error: null, nextRetryAt: null }, null);
    assert.equal(bodies(), 0, 'freed with its last job');
  } finally {
    await store.close();
  }
});
