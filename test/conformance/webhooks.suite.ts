// The webhook part of the Store seam (src/store/webhooks.ts), run against every backend: the per-key
// limit is atomic, matching by address and *@domain, a claimed job goes to one caller until its
// lease runs out, finish() retries or removes, the attempt log is newest first and bounded.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type DeliveryAttempt, type DeliveryJob, type WebhookRecord } from '../../src/store/webhooks.ts';
import { storeTest, type StoreHarness } from './store.suite.ts';

const hook = (over: Partial<WebhookRecord> = {}): WebhookRecord => ({
  id: `wh_${randomUUID()}`, keyHash: 'k'.repeat(64), url: 'https://receiver.example/hook', target: `a-${randomUUID().slice(0, 8)}@ephemail.test`,
  secret: 'whsec_c2VjcmV0', createdAt: Date.now(), ...over,
});
const job = (webhookId: string, over: Partial<DeliveryJob> = {}): DeliveryJob => ({
  id: `msg_${randomUUID()}`, webhookId, emailId: randomUUID(), payload: '{"type":"email.received"}', attempts: 0, dueAt: 1000, expiresAt: 1_000_000, ...over,
});
const attempt = (j: DeliveryJob, n: number, status: DeliveryAttempt['status'], at = 2000): DeliveryAttempt => ({
  jobId: j.id, emailId: j.emailId, attempt: n, at, status, responseCode: status === 'delivered' ? 200 : 500, error: status === 'delivered' ? null : 'HTTP 500', nextRetryAt: status === 'retrying' ? at + 1000 : null,
});

export function webhookSuite(name: string, harness: StoreHarness): void {
  if (harness.skip) {
    it(`Webhook store conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Webhook store conformance: ${name}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    withStore('registrations: per-key limit holds under parallel adds; list, match, get and delete', async (store) => {
      const w = store.webhooks;
      const keyHash = randomUUID().replace(/-/g, '');
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => w.addWebhook(hook({ keyHash, createdAt: 1000 + i, target: '*@ephemail.test' }), 5)));
      assert.equal(results.filter(Boolean).length, 5);
      const listed = await w.listWebhooks(keyHash);
      assert.equal(listed.length, 5);
      assert.deepEqual(listed.map((h) => h.createdAt), [...listed.map((h) => h.createdAt)].sort((a, b) => a - b));
      const one = hook();
      assert.ok(await w.addWebhook(one, 5));
      assert.deepEqual(await w.getWebhook(one.id), one);
      assert.equal(await w.getWebhook('wh_missing'), null);
      const matched = await w.matching([one.target, '*@ephemail.test', 'nobody@ephemail.test']);
      assert.deepEqual(new Set(matched.map((h) => h.id)), new Set([one.id, ...listed.map((h) => h.id)]));
      assert.equal(await w.deleteWebhook('other-key', one.id), false, 'only its key deletes it');
      assert.ok(await w.deleteWebhook(one.keyHash, one.id));
      assert.equal(await w.getWebhook(one.id), null);
      assert.deepEqual(await w.matching([one.target]), []);
      assert.equal(await w.deleteWebhook(one.keyHash, one.id), false);
    });

    withStore('queue: a due job is claimed by one caller; its lease ends and it is due again; finish retries or removes', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, 10);
      const j = job(h.id, { dueAt: 1000 });
      const later = job(h.id, { dueAt: 50_000 });
      await w.enqueue([j, later]);
      assert.equal(await w.pendingCount(h.id), 2);
      assert.deepEqual(await w.claim(999, 10_000, 10), [], 'nothing is due before its time');
      const [a, b] = await Promise.all([w.claim(1000, 10_000, 10), w.claim(1000, 10_000, 10)]);
      assert.equal(a.length + b.length, 1, 'one caller gets it');
      const got = [...a, ...b][0];
      assert.deepEqual({ ...got, dueAt: 0 }, { ...j, dueAt: 0 });
      assert.deepEqual((await w.claim(10_999, 10_000, 10)).map((x) => x.id), [], 'leased until 11000');
      const again = await w.claim(11_000, 10_000, 10);
      assert.deepEqual(again.map((x) => x.id), [j.id], 'a lease that ran out makes it due again (a dead node)');
      await w.finish(again[0], h.id, attempt(j, 1, 'retrying', 11_000), 12_000);
      assert.deepEqual(await w.claim(11_999, 10_000, 10), []);
      const retried = await w.claim(12_000, 10_000, 10);
      assert.deepEqual(retried.map((x) => [x.id, x.attempts]), [[j.id, 1]], 'the attempt count is kept');
      await w.finish(retried[0], h.id, attempt(j, 2, 'delivered', 12_000), null);
      assert.equal(await w.pendingCount(h.id), 1);
      assert.deepEqual((await w.claim(100_000, 10_000, 10)).map((x) => x.id), [later.id]);
      const log = await w.listAttempts(h.id, 10, 100_000);
      assert.deepEqual(log.map((x) => [x.attempt, x.status]), [[2, 'delivered'], [1, 'retrying']]);
      assert.deepEqual(log[1], attempt(j, 1, 'retrying', 11_000));
    });

    withStore('queue: enqueue is idempotent per job id; a deleted webhook loses its pending jobs; the log is bounded', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, 10);
      const j = job(h.id);
      await w.enqueue([j]);
      await w.enqueue([j]);
      assert.equal(await w.pendingCount(h.id), 1);
      for (let i = 1; i <= ATTEMPTS_KEPT + 5; i++) await w.finish(j, h.id, attempt(j, i, 'retrying', 2000 + i), 3000 + i);
      const log = await w.listAttempts(h.id, 1000, 10_000);
      assert.equal(log.length, ATTEMPTS_KEPT);
      assert.equal(log[0].attempt, ATTEMPTS_KEPT + 5, 'newest first');
      assert.ok(await w.deleteWebhook(h.keyHash, h.id));
      assert.equal(await w.pendingCount(h.id), 0);
      assert.deepEqual((await w.claim(1e12, 1000, 100)).filter((x) => x.webhookId === h.id), []);
    });

    withStore('the delivery log keeps two hours: older attempts are not listed, and the sweep drops them', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, 10);
      const j = job(h.id);
      const t0 = Date.now();
      await w.enqueue([j]);
      await w.finish(j, h.id, attempt(j, 1, 'retrying', t0), t0 + 1000);
      await w.finish(j, h.id, attempt(j, 2, 'retrying', t0 + 3_600_000), t0 + 3_601_000);
      const at = async (now: number) => (await w.listAttempts(h.id, 10, now)).map((x) => x.attempt);
      assert.deepEqual(await at(t0 + 3_600_000), [2, 1]);
      assert.deepEqual(await at(t0 + ATTEMPTS_TTL_MS - 1), [2, 1]);
      assert.deepEqual(await at(t0 + ATTEMPTS_TTL_MS), [2], 'the first attempt is two hours old: gone, with no other delivery since');
      assert.deepEqual(await at(t0 + ATTEMPTS_TTL_MS + 3_600_000), []);
      await store.sweepExpired(t0 + ATTEMPTS_TTL_MS + 3_600_000);
      // what is still stored: read as of an earlier time. SQLite's sweep deletes the rows; Redis
      // expires the whole log key two hours after its last attempt (real time), not in the sweep.
      if (!store.capabilities.sharedAcrossProcesses) assert.deepEqual(await at(t0 + 3_600_000), [], 'the sweep dropped both');
    });
  });
}
