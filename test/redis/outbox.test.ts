// The Redis store's webhook outbox (issue 35 finding 11), on the shared Redis and a 3-master Cluster:
// new mail's events are written in the mail's own script, to an outbox in the inbox's slot, then
// queued (the queue's slot). The outbox's write failing stores neither the mail nor its events; the
// queue's write failing stores both (the events left in the outbox, `deferred`), and the sweep queues
// them, once: moving the same outbox again queues nothing twice, even after delivery.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseRedisUrl } from '../../src/redis/client.ts';
import { addressSlot, keyspace, type Keyspace } from '../../src/redis/keys.ts';
import { createRedisStore } from '../../src/store/redis/redis-store.ts';
import type { MailEvents, WebhookRecord } from '../../src/store/webhooks.ts';
import type { Store } from '../../src/store/store.ts';
import { inbox, newEmail } from '../conformance/harness.ts';
import { redisHarness } from '../conformance/redis-harness.ts';
import { SKIP_REDIS, SKIP_SERVER, TEST_REDIS_URL, startCluster, type RedisCluster } from './servers.ts';

const hook = (target: string): WebhookRecord => ({ id: `wh_${randomUUID()}`, keyHash: `key-${randomUUID()}`, url: 'https://receiver.example/', target, secret: 'whsec_c2VjcmV0', createdAt: 1 });
const eventsFor = (h: WebhookRecord, expiresAt: number): MailEvents => ({
  jobs: [{ id: `msg_${randomUUID()}`, webhookId: h.id, keyHash: h.keyHash, email: 0, dueAt: Date.now(), expiresAt }],
  bodies: new Map([[0, ['{"id":"', '"}']]]),
  caps: { perKey: 100, perHook: 100 },
});

function outboxSuite(name: string, skip: string | false, url: () => string, setup?: { before(): Promise<void>; after(): Promise<void> }): void {
  describe(`webhook outbox: ${name}`, { skip, concurrency: 1 }, () => {
    const h = redisHarness(url);
    let store: Store;
    let k: Keyspace;
    before(async () => {
      await setup?.before();
      k = keyspace(h.prefix());
      store = createRedisStore({ client: await h.client(), keys: k, cluster: parseRedisUrl(url()).cluster, ownsClient: false });
    });
    after(async () => {
      await h.cleanup();
      await setup?.after();
    });

    test('the outbox\'s write failing stores neither the mail nor its events', async () => {
      const client = await h.client();
      const address = inbox('ob-');
      await store.addEmails([newEmail(address)]);
      const w = hook(address);
      await store.webhooks.addWebhook(w, { perKey: 10, perTarget: 10 });
      const outbox = `${k.slotBase(addressSlot(address))}wo`;
      await client.set(outbox, 'injected: not a hash');
      const e = newEmail(address, { subject: 'refused' });
      await assert.rejects(store.addEmails([e], eventsFor(w, e.expiresAt)));
      assert.deepEqual((await store.listEmails(address, { limit: 10 }, Date.now())).map((x) => x.subject), ['hello'], 'only the earlier mail');
      assert.equal(await store.webhooks.pendingCount(w.id), 0);
      await client.del(outbox);
    });

    test('the queue\'s write failing stores both: the sweep queues the events, once, even when moved again after delivery', async () => {
      const client = await h.client();
      const address = inbox('ob-');
      await store.addEmails([newEmail(address)]);
      const w = hook(address);
      await store.webhooks.addWebhook(w, { perKey: 10, perTarget: 10 });
      const pending = `${k.prefix}{wh}:hj:${w.id}`;
      await client.set(pending, 'injected: not a set');
      const e = newEmail(address, { subject: 'kept' });
      const events = eventsFor(w, e.expiresAt);
      const [row] = await store.addEmails([e], events);
      assert.equal(events.deferred, true, 'stored, not queued yet');
      assert.ok(await store.getEmail(row.id, Date.now()));
      const outbox = `${k.slotBase(addressSlot(address))}wo`;
      const kept = await client.hgetall(outbox);
      await client.del(pending);

      await store.sweepExpired(Date.now());
      assert.equal(await client.exists(outbox), 0, 'the sweep emptied the outbox');
      const [job] = await store.webhooks.claim(Date.now() + 1, 10_000, 10);
      assert.deepEqual([job.id, job.emailId, job.payload], [events.jobs[0].id, row.id, `{"id":"${row.id}"}`]);
      await store.webhooks.finish(job, w.id, { jobId: job.id, emailId: job.emailId, attempt: 1, at: Date.now(), status: 'delivered', responseCode: 200, error: null, nextRetryAt: null }, null);

      // the same outbox moved again (a node that died between queueing and emptying it): nothing queued twice
      await client.hset(outbox, kept);
      await store.sweepExpired(Date.now());
      assert.equal(await client.exists(outbox), 0);
      assert.deepEqual(await store.webhooks.claim(Date.now() + 2, 10_000, 10), [], 'delivered once, never again');
      assert.equal(await store.webhooks.pendingCount(w.id), 0);
    });
  });
}

outboxSuite('redis', SKIP_REDIS, () => TEST_REDIS_URL);
let cluster: RedisCluster | null = null;
outboxSuite('redis cluster (3 masters)', SKIP_SERVER, () => cluster!.url, {
  before: async () => void (cluster = await startCluster(3)),
  after: async () => void (await cluster?.stop()),
});
