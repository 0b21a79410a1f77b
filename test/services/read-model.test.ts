// The read model (services/answers.ts): one cache of final answers, bounded by the bytes it holds,
// and its one staleness rule, on every backend: after a delete (on this node or, on Redis, another
// one), an expiry, or views written again, the next read is right.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { ANSWER_OVERHEAD_BYTES, createAnswerCache } from '../../src/services/answers.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { SKIP_REDIS, testStoreUrl } from '../redis/servers.ts';

test('the cache: counted from the bytes it holds, least recently used out first (one at a time), dropped by message and by email', () => {
  const entry = (n: number) => Buffer.alloc(n, 0x61);
  const size = (face: string, id: string, key: string, n: number) => n + ANSWER_OVERHEAD_BYTES + 2 * (`${face} ${id}`.length + key.length);
  const max = 8 * size('api', 'a', 'ka', 1000);
  const c = createAnswerCache(max);
  const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  for (const id of ids) c.put('api', id, `k${id}`, Infinity, entry(1000));
  assert.equal(c.stats.bytes, max, 'exactly what the answers hold, plus the fixed overhead');
  assert.ok(c.get('api', 'a', 'ka'), 'a is used: b is now the least recently used');
  c.put('api', 'i', 'ki', Infinity, entry(1000));
  assert.equal(c.get('api', 'b', 'kb'), undefined, 'b went, alone');
  for (const id of ['a', 'c', 'd', 'e', 'f', 'g', 'h', 'i']) assert.ok(c.get('api', id, `k${id}`), `${id} stays`);
  assert.equal(c.get('api', 'a', 'another-message'), undefined, 'an answer answers only for its own message');
  c.put('api', 'x', 'kx', Infinity, entry(max / 4)); // larger than an eighth of the cache: not kept
  assert.equal(c.stats.entries, 7, 'x is not kept (and a, asked for another message, was dropped)');
  c.forgetMessage('kc');
  assert.equal(c.get('api', 'c', 'kc'), undefined);
  c.forgetEmail('d');
  assert.equal(c.get('api', 'd', 'kd'), undefined);
  c.put('api', 'e', 'ke', 100, entry(10));
  c.sweep(100);
  assert.equal(c.get('api', 'e', 'ke'), undefined, 'expired by the sweep');
  assert.equal(c.stats.entries, 4);
  assert.ok(c.stats.hits > 0 && c.stats.misses > 0);
});

/** A clock the test moves (the service's `now`). */
const movable = () => {
  let offset = 0;
  return { now: () => Date.now() + offset, move: (ms: number) => (offset += ms) };
};

async function readTwice(svc: TestService, address: string, subject: string) {
  await svc.send({ to: address, subject, text: `body of ${subject}` });
  let id = '';
  await until(async () => {
    const r = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`);
    const body = (await r.json()) as { data: { id: string }[] };
    id = body.data[0]?.id ?? '';
    return id !== '';
  }, 'the email is listed', 10_000, 20);
  // verdicts arrive in the background (temperror at once: no DNS here): read until the answer is final
  await until(async () => {
    const r = await svc.api(`/api/v1/emails/${id}`);
    return ((await r.json()) as { data: { authentication: unknown } }).data.authentication !== null;
  }, 'the verdicts are in', 10_000, 20);
  const first = await svc.api(`/api/v1/emails/${id}`);
  assert.equal(first.status, 200);
  const hits = svc.service.core.answers.stats.hits;
  const second = await svc.api(`/api/v1/emails/${id}`);
  assert.equal(second.status, 200);
  assert.equal(((await second.json()) as { data: { subject: string } }).data.subject, subject);
  assert.equal(svc.service.core.answers.stats.hits, hits + 1, 'the second read was answered by the read model');
  await first.arrayBuffer();
  return id;
}

const backends: [string, Record<string, string> | null][] = [
  ['SQLite', { EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000' }],
  ['Redis', SKIP_REDIS ? null : { EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_STORE: testStoreUrl(`ephtest:answers:${randomUUID().slice(0, 8)}:`) }],
];

for (const [name, env] of backends) {
  describe(`the read model's staleness rule on ${name}`, { skip: env === null ? String(SKIP_REDIS) : false, concurrency: 1 }, () => {
    const clock = movable();
    let svc: TestService;
    after(() => svc?.stop());

    test('a delete: the next read is 404, and the answer is dropped', async () => {
      svc = await startService(env!, { clock });
      const id = await readTwice(svc, `del-${randomUUID().slice(0, 6)}@ephemail.test`, 'to be deleted');
      const bytes = svc.service.core.answers.stats.bytes;
      assert.equal((await svc.api(`/api/v1/emails/${id}`, { method: 'DELETE' })).status, 204);
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
      assert.ok(svc.service.core.answers.stats.bytes < bytes, 'its bytes are given back');
    });

    test('an expiry: the next read is 404', async () => {
      const id = await readTwice(svc, `exp-${randomUUID().slice(0, 6)}@ephemail.test`, 'to expire');
      clock.move(3601_000);
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
    });

    test('views written again (a spam score asked again, say): the next read derives the answer anew', async () => {
      clock.move(-3601_000);
      const id = await readTwice(svc, `views-${randomUUID().slice(0, 6)}@ephemail.test`, 'views written');
      const core = svc.service.core;
      const row = await core.store.getEmail(id, core.clock.now());
      const misses = core.answers.stats.misses;
      core.answers.forgetMessage(row!.messageKey); // what the views and verdicts services call after a write (services/views.test.ts)
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 200);
      assert.equal(core.answers.stats.misses, misses + 1, 'not answered from what was kept');
    });

    test('an inbox purged: the next read of each of its emails is 404', async () => {
      const address = `purge-${randomUUID().slice(0, 6)}@ephemail.test`;
      const id = await readTwice(svc, address, 'to be purged');
      const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`, { method: 'DELETE' });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { data: { deleted: number } }).data.deleted, 1);
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
    });

    test('a delete through the store seam alone (as IMAP\'s EXPUNGE and POP3\'s DELE make): the next read is 404', async () => {
      const id = await readTwice(svc, `seam-${randomUUID().slice(0, 6)}@ephemail.test`, 'deleted by the seam');
      const core = svc.service.core;
      assert.equal(await core.store.deleteEmail(id, core.clock.now()), true);
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
    });

    test('a delete that removes nothing (an unknown id, an empty inbox) keeps what was kept: the next read is still answered from it', async () => {
      const address = `keep-${randomUUID().slice(0, 6)}@ephemail.test`;
      const id = await readTwice(svc, address, 'kept through a 404');
      const core = svc.service.core;
      const before = core.store.deletions?.();
      assert.equal((await svc.api(`/api/v1/emails/${randomUUID()}`, { method: 'DELETE' })).status, 404);
      const empty = await svc.api(`/api/v1/inboxes/${encodeURIComponent(`none-${randomUUID().slice(0, 6)}@ephemail.test`)}/emails`, { method: 'DELETE' });
      assert.equal(((await empty.json()) as { data: { deleted: number } }).data.deleted, 0);
      assert.equal(core.store.deletions?.(), before, 'the store\'s deletions count did not move');
      const hits = core.answers.stats.hits;
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 200);
      assert.equal(core.answers.stats.hits, hits + 1, 'answered by the read model');
    });

    test('an expiry swept, then the clock set back: the swept email stays 404', async () => {
      const id = await readTwice(svc, `swept-${randomUUID().slice(0, 6)}@ephemail.test`, 'to be swept');
      const core = svc.service.core;
      clock.move(3601_000);
      assert.ok((await core.store.sweepExpired(core.clock.now())) >= 1);
      clock.move(-3601_000);
      assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
    });

    if (name === 'Redis') {
      test('another node\'s delete: the next read on this node is 404', async () => {
        const other = await startService(env!);
        try {
          const id = await readTwice(svc, `node-${randomUUID().slice(0, 6)}@ephemail.test`, 'deleted elsewhere');
          assert.equal((await other.api(`/api/v1/emails/${id}`, { method: 'DELETE' })).status, 204);
          assert.equal((await svc.api(`/api/v1/emails/${id}`)).status, 404);
        } finally {
          await other.stop();
        }
      });
    }
  });
}
