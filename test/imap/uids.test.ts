// IMAP UIDs (src/store/uids.ts) on each backend: numbered in id order, kept for ids already numbered,
// never given again, dropped below the first live id when the listing is complete, a new numbering
// (and UIDVALIDITY) once the old one expired; and on SQLite the same after a restart of the service.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ImapFlow } from 'imapflow';
import { Redis } from 'ioredis';
import { assemble } from '../../src/assemble.ts';
import { loadConfig } from '../../src/config.ts';
import { keyspace } from '../../src/redis/keys.ts';
import { createRedisUids } from '../../src/store/redis/uids.ts';
import { createSqliteUids } from '../../src/store/sqlite/uids.ts';
import { createMemoryUids, type UidStore } from '../../src/store/uids.ts';
import { SKIP_REDIS, SKIP_SERVER, TEST_REDIS_URL, dropPrefix, startCluster } from '../redis/servers.ts';
import { openRedisBackends } from '../../src/assemble-redis.ts';
import pino from 'pino';
import { NO_DNS } from '../helpers/service.ts';

const dir = mkdtempSync(join(tmpdir(), 'ephemail-uids-'));
const prefix = `ephtest:uids:${randomUUID().slice(0, 8)}:`;
const redis = SKIP_REDIS ? null : new Redis(TEST_REDIS_URL);
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (redis) {
    await dropPrefix(redis as never, prefix);
    redis.disconnect();
  }
});

const id = (n: number) => `0190${String(n).padStart(4, '0')}-0000-7000-8000-000000000000`;
const T = 1_800_000_000_000;

async function suite(store: UidStore) {
  const a = await store.number('a@x.test', [id(1), id(2)], true, T + 1000, T);
  assert.deepEqual(a.uids, [1, 2]);
  assert.equal(a.next, 3);
  assert.equal(a.validity, Math.floor(T / 1000));
  // numbered ids keep their UIDs; new ones follow; another address has its own numbering
  const b = await store.number('a@x.test', [id(2), id(3), id(5)], true, T + 1000, T + 1);
  assert.deepEqual(b.uids, [2, 3, 4]);
  assert.deepEqual((await store.number('b@x.test', [id(4)], false, T + 1000, T + 1)).uids, [1]);
  // an id below the last numbered that has no number (never happens in order) gets 0, not a reused number
  assert.deepEqual((await store.number('a@x.test', [id(4)], false, T + 1000, T + 2)).uids, [0]);
  // id 1 was dropped by the complete listing: never numbered again
  assert.deepEqual((await store.number('a@x.test', [id(1), id(6)], false, T + 1000, T + 3)).uids, [0, 5]);
  // past keepUntil: a new numbering
  const fresh = await store.number('a@x.test', [id(7)], true, T + 99_000, T + 5000);
  assert.deepEqual(fresh.uids, [1]);
  assert.equal(fresh.validity, Math.floor((T + 5000) / 1000));
}

test('memory', () => suite(createMemoryUids()));
test('SQLite file', async () => {
  const store = createSqliteUids(join(dir, 'u.db-imap'));
  await suite(store);
  await store.close();
});
test('Redis', { skip: SKIP_REDIS }, async () => {
  await suite(createRedisUids(redis!, keyspace(prefix)));
});

test('Redis Cluster (3 masters): the numbering of each inbox lives in its slot', { skip: SKIP_SERVER, timeout: 120_000 }, async () => {
  const cluster = await startCluster(3);
  try {
    const backends = await openRedisBackends(loadConfig({ EPHEMAIL_STORE: cluster.url }), pino({ level: 'silent' }));
    try {
      await suite(backends.uids!);
      // inboxes in many slots
      for (let i = 0; i < 20; i++) assert.deepEqual((await backends.uids!.number(`box${i}@x.test`, [id(1), id(2)], true, T + 1000, T)).uids, [1, 2]);
    } finally {
      await backends.bus.close();
      await backends.limiter.close();
      await backends.store.close();
    }
  } finally {
    await cluster.stop();
  }
});

test('SQLite: the same UIDs after the service restarts on the same database', async () => {
  const db = join(dir, 'restart.db');
  const env = { EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_IMAP_PORT: '0', EPHEMAIL_POP3_PORT: 'off', EPHEMAIL_STORE: `sqlite:${db}`, EPHEMAIL_LOG_LEVEL: 'silent', EPHEMAIL_DNS_SERVERS: NO_DNS };
  const read = async (deliver: number) => {
    const service = await assemble(loadConfig(env), { mounts: [] });
    const urls = await service.start();
    try {
      const { default: nodemailer } = await import('nodemailer');
      const t = nodemailer.createTransport({ host: '127.0.0.1', port: Number(urls.smtp.split(':').pop()), secure: false, ignoreTLS: true });
      for (let i = 0; i < deliver; i++) await t.sendMail({ from: 's@example.org', to: 'r@ephemail.test', subject: `s${i}`, text: 'x' });
      t.close();
      const c = new ImapFlow({ host: '127.0.0.1', port: Number(urls.imap!.split(':').pop()), secure: false, auth: { user: 'r@ephemail.test', pass: 'x' }, logger: false });
      await c.connect();
      const box = await c.mailboxOpen('INBOX');
      const uids: number[] = [];
      for await (const m of c.fetch('1:*', { uid: true })) uids.push(m.uid);
      await c.logout();
      return { validity: Number(box.uidValidity), uids };
    } finally {
      await service.stop();
    }
  };
  const first = await read(3);
  assert.deepEqual(first.uids, [1, 2, 3]);
  const again = await read(1);
  assert.equal(again.validity, first.validity);
  assert.deepEqual(again.uids, [1, 2, 3, 4]);
});
