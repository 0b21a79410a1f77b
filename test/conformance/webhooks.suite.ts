// The webhook part of the Store seam (src/store/webhooks.ts), run against every backend: the per-key
// and per-address limits are atomic, matching by address and *@domain, a claimed job goes to one
// caller until its lease runs out, finish() retries or removes, the attempt log is newest first and
// bounded, pending events are capped per key and per webhook, an email's event body is stored once,
// and expired events are never claimed and are swept.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type DeliveryAttempt, type DeliveryJob, type EventBody, type MailEventJob, type MailEvents, type NewDeliveryJob, type WebhookRecord } from '../../src/store/webhooks.ts';
import { inbox, newEmail, storeTest, type StoreHarness } from './harness.ts';

export interface WebhookHarness extends StoreHarness {
  /** How many event bodies the store opened last holds (a look at the backend's own storage), where the harness can tell. */
  bodies?(): Promise<number>;
}

const hook = (over: Partial<WebhookRecord> = {}): WebhookRecord => ({
  id: `wh_${randomUUID()}`, keyHash: 'k'.repeat(64), url: 'https://receiver.example/hook', target: `a-${randomUUID().slice(0, 8)}@ephemail.test`,
  secret: 'whsec_c2VjcmV0', createdAt: Date.now(), ...over,
});
const job = (webhookId: string, over: Partial<DeliveryJob> = {}): DeliveryJob => ({
  id: `msg_${randomUUID()}`, webhookId, keyHash: 'k'.repeat(64), emailId: randomUUID(), payload: '{"type":"email.received"}', attempts: 0, dueAt: 1000, expiresAt: 1_000_000, ...over,
});
/** The queue's input for jobs: each job's body once per email, and the jobs without theirs. */
const bodiesOf = (jobs: DeliveryJob[]): EventBody[] => [...new Map(jobs.map((j) => [j.emailId, { emailId: j.emailId, payload: j.payload, expiresAt: j.expiresAt }])).values()];
const bare = ({ payload: _p, attempts: _a, ...j }: DeliveryJob): NewDeliveryJob => j;
const ROOMY = { perKey: 1000, perHook: 1000 };
/** Queues jobs as the service does (bodies once per email, caps); returns what was refused. */
const enqueue = (store: { webhooks: { enqueue: (b: EventBody[], j: NewDeliveryJob[], c: typeof ROOMY) => Promise<{ job: NewDeliveryJob; reason: string }[]> } }, jobs: DeliveryJob[], caps = ROOMY) =>
  store.webhooks.enqueue(bodiesOf(jobs), jobs.map(bare), caps);
const ADD = { perKey: 10, perTarget: 10 };
const attempt = (j: DeliveryJob, n: number, status: DeliveryAttempt['status'], at = 2000): DeliveryAttempt => ({
  jobId: j.id, emailId: j.emailId, attempt: n, at, status, responseCode: status === 'delivered' ? 200 : 500, error: status === 'delivered' ? null : 'HTTP 500', nextRetryAt: status === 'retrying' ? at + 1000 : null,
});

export function webhookSuite(name: string, harness: WebhookHarness): void {
  if (harness.skip) {
    it(`Webhook store conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Webhook store conformance: ${name}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    withStore('registrations: per-key limit holds under parallel adds; list, match, get and delete', async (store) => {
      const w = store.webhooks;
      const keyHash = randomUUID().replace(/-/g, '');
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => w.addWebhook(hook({ keyHash, createdAt: 1000 + i, target: '*@ephemail.test' }), { perKey: 5, perTarget: 10 })));
      assert.deepEqual(results.filter((r) => r === 'added').length, 5);
      assert.deepEqual(results.filter((r) => r === 'key_full').length, 3);
      const listed = await w.listWebhooks(keyHash);
      assert.equal(listed.length, 5);
      assert.deepEqual(listed.map((h) => h.createdAt), [...listed.map((h) => h.createdAt)].sort((a, b) => a - b));
      const one = hook();
      assert.equal(await w.addWebhook(one, { perKey: 5, perTarget: 10 }), 'added');
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
      await w.addWebhook(h, ADD);
      const j = job(h.id, { dueAt: 1000 });
      const later = job(h.id, { dueAt: 50_000 });
      await enqueue(store, [j, later]);
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

    withStore('queue: a fair claim gives no key more than its room; the others\' due jobs are claimed past a busy key\'s backlog', async (store) => {
      const w = store.webhooks;
      const slow = hook({ keyHash: 'a'.repeat(64) });
      const quick = hook({ keyHash: 'b'.repeat(64) });
      await w.addWebhook(slow, ADD);
      await w.addWebhook(quick, ADD);
      // twelve of the busy key's events queued first, then one of another key's
      const backlog = Array.from({ length: 12 }, (_, i) => job(slow.id, { keyHash: slow.keyHash, dueAt: 1000 + i }));
      const other = job(quick.id, { keyHash: quick.keyHash, dueAt: 2000 });
      const second = job(quick.id, { keyHash: quick.keyHash, dueAt: 2500 });
      await enqueue(store, [...backlog, other, second]);
      // the busy key already runs one delivery of its share of two: one more of its jobs, and the other key's
      const fair = await w.claim(3000, 10_000, 5, { perKey: 2, held: { [slow.keyHash]: 1, [quick.keyHash]: 1 } });
      assert.deepEqual(fair.map((j) => j.id).sort(), [backlog[0].id, other.id].sort());
      // a key at its share gets none, even when its backlog is longer than the claim looks at (4 x 2)
      assert.deepEqual((await w.claim(3000, 10_000, 2, { perKey: 2, held: { [slow.keyHash]: 2 } })).map((j) => j.id), [second.id]);
      // without a share the queue is first come, first served
      assert.deepEqual((await w.claim(3000, 10_000, 3)).map((j) => j.id), backlog.slice(1, 4).map((j) => j.id));
    });

    withStore('queue: enqueue is idempotent per job id; a deleted webhook loses its pending jobs; the log is bounded', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, ADD);
      const j = job(h.id);
      await enqueue(store, [j]);
      await enqueue(store, [j]);
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
      await w.addWebhook(h, ADD);
      const j = job(h.id);
      const t0 = Date.now();
      await enqueue(store, [j]);
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

    withStore('registrations: at most perTarget webhooks watch one address, all keys together, under parallel adds', async (store) => {
      const w = store.webhooks;
      const target = `busy-${randomUUID().slice(0, 8)}@ephemail.test`;
      // twelve keys race for one address watched by at most five
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => w.addWebhook(hook({ keyHash: `key-${i}-${randomUUID()}`, target }), { perKey: 10, perTarget: 5 })));
      assert.equal(results.filter((r) => r === 'added').length, 5);
      assert.equal(results.filter((r) => r === 'target_full').length, 7);
      const watching = await w.matching([target]);
      assert.equal(watching.length, 5);
      // another address is not affected; deleting one makes room for one
      assert.equal(await w.addWebhook(hook({ keyHash: 'key-x' }), { perKey: 10, perTarget: 5 }), 'added');
      assert.ok(await w.deleteWebhook(watching[0].keyHash, watching[0].id));
      assert.equal(await w.addWebhook(hook({ keyHash: 'key-y', target }), { perKey: 10, perTarget: 5 }), 'added');
      assert.equal(await w.addWebhook(hook({ keyHash: 'key-z', target }), { perKey: 10, perTarget: 5 }), 'target_full');
      assert.equal((await w.matching([target])).length, 5);
    });

    withStore('queue: pending events are capped per webhook and per key; over a cap the job is refused with its reason; a finished job frees its room', async (store) => {
      const w = store.webhooks;
      const keyHash = `key-${randomUUID()}`;
      const [a, b, c] = [hook({ keyHash }), hook({ keyHash }), hook()];
      for (const h of [a, b, c]) await w.addWebhook(h, ADD);
      const caps = { perKey: 5, perHook: 3 };
      const forA = Array.from({ length: 4 }, () => job(a.id, { keyHash }));
      const forB = Array.from({ length: 4 }, () => job(b.id, { keyHash }));
      const forC = [job(c.id, { keyHash: c.keyHash })];
      const dropped = await enqueue(store, [...forA, ...forB, ...forC], caps);
      // a: three fit (its own cap); b: two fit (the key's five are used up); c's key is another key
      assert.deepEqual(dropped.map((d) => [d.job.id, d.reason]), [[forA[3].id, 'hook_pending'], [forB[2].id, 'key_pending'], [forB[3].id, 'key_pending']]);
      assert.deepEqual(await Promise.all([a, b, c].map((h) => w.pendingCount(h.id))), [3, 2, 1]);
      // the caps count what is stored, across calls: one more for b is refused
      assert.deepEqual((await enqueue(store, [job(b.id, { keyHash })], caps)).map((d) => d.reason), ['key_pending']);
      // a job already queued is not counted twice nor refused
      assert.deepEqual(await enqueue(store, [forA[0]], caps), []);
      assert.equal(await w.pendingCount(a.id), 3);
      // a's first job is delivered: the key has room for one again
      const claimed = await w.claim(2000, 10_000, 100);
      const done = claimed.find((x) => x.id === forA[0].id)!;
      await w.finish(done, a.id, attempt(done, 1, 'delivered'), null);
      const late = job(b.id, { keyHash });
      assert.deepEqual(await enqueue(store, [late], caps), []);
      assert.deepEqual(await Promise.all([a, b].map((h) => w.pendingCount(h.id))), [2, 3]);
      // a deleted webhook frees its key's room too
      assert.ok(await w.deleteWebhook(keyHash, a.id));
      assert.deepEqual(await enqueue(store, [job(b.id, { keyHash })], { perKey: 5, perHook: 10 }), []);
    });

    withStore('an email\'s event body is stored once, whatever the number of its webhooks; every claimed job carries it; it goes with the last job', async (store) => {
      const w = store.webhooks;
      const hooks = Array.from({ length: 10 }, () => hook());
      for (const h of hooks) await w.addWebhook(h, ADD);
      const emailId = randomUUID();
      const payload = JSON.stringify({ type: 'email.received', data: { subject: 'x'.repeat(20_000) } });
      const jobs = hooks.map((h) => job(h.id, { emailId, payload, keyHash: h.keyHash }));
      const other = job(hooks[0].id, { keyHash: hooks[0].keyHash, payload: '{"other":true}' });
      const before = await harness.bodies?.();
      assert.deepEqual(await store.webhooks.enqueue([{ emailId, payload, expiresAt: jobs[0].expiresAt }, ...bodiesOf([other])], [...jobs, other].map(bare), ROOMY), []);
      if (before !== undefined) assert.equal(await harness.bodies!(), before + 2, 'one body per email, not one per job');
      const claimed = await w.claim(2000, 10_000, 100);
      assert.equal(claimed.length, 11);
      for (const x of claimed) assert.equal(x.payload, x.id === other.id ? '{"other":true}' : payload);
      for (const x of claimed.filter((y) => y.id !== other.id)) await w.finish(x, x.webhookId, attempt(x, 1, 'delivered'), null);
      if (before !== undefined) assert.equal(await harness.bodies!(), before + 1, 'freed with its last job');
      // a body none of whose jobs was queued (all over a cap) is not kept
      const full = hook();
      await w.addWebhook(full, ADD);
      const refused = job(full.id, { keyHash: full.keyHash, payload: '{"refused":true}' });
      assert.equal((await enqueue(store, [refused], { perKey: 0, perHook: 0 })).length, 1);
      if (before !== undefined) assert.equal(await harness.bodies!(), before + 1, 'no body without a job');
    });

    withStore('expired events are never claimed, and the sweep deletes them with their bodies, freeing their room', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, ADD);
      const caps = { perKey: 2, perHook: 2 };
      const t0 = 1_000_000;
      const old = job(h.id, { keyHash: h.keyHash, dueAt: t0, expiresAt: t0 + 5000 });
      const live = job(h.id, { keyHash: h.keyHash, dueAt: t0 + 9000, expiresAt: t0 + 3_600_000 });
      const before = await harness.bodies?.();
      assert.deepEqual(await enqueue(store, [old, live], caps), []);
      // the old one was never attempted (a backlog, a node down): past its email's lifetime it is not sent
      assert.deepEqual((await w.claim(t0 + 10_000, 100_000, 10)).map((x) => x.id), [live.id]);
      await store.sweepExpired(t0 + 10_000);
      assert.equal(await w.pendingCount(h.id), 1, 'the expired event is gone');
      if (before !== undefined) assert.equal(await harness.bodies!(), before + 1, 'with its body');
      // its room is free again: one more fits, the next does not
      const more = [job(h.id, { keyHash: h.keyHash, dueAt: t0 + 10_000, expiresAt: t0 + 3_600_000 }), job(h.id, { keyHash: h.keyHash, dueAt: t0 + 10_000, expiresAt: t0 + 3_600_000 })];
      assert.deepEqual((await enqueue(store, more, caps)).map((d) => d.job.id), [more[1].id]);
      // an expired event that was leased (a node died with it) goes too
      assert.deepEqual((await w.claim(t0 + 20_000, 10_000, 10)).map((x) => x.id), [more[0].id]);
      await store.sweepExpired(t0 + 3_600_000);
      assert.equal(await w.pendingCount(h.id), 0);
      assert.deepEqual(await w.claim(t0 + 4_000_000, 10_000, 10), []);
      if (before !== undefined) assert.equal(await harness.bodies!(), before);
    });

    withStore('addEmails with events writes the mail and its jobs in one write: each job is queued with its email\'s id in its body; a cap refuses with its reason', async (store) => {
      const w = store.webhooks;
      const keyHash = `key-${randomUUID()}`;
      const [a, b] = [hook({ keyHash }), hook({ keyHash })];
      for (const h of [a, b]) await w.addWebhook(h, ADD);
      const now = Date.now();
      // two inboxes (two slots on Cluster), events for both; the body names the id where the pieces join
      const emails = [newEmail(inbox('ev-')), newEmail(inbox('ev-'))];
      const jobs: MailEventJob[] = [
        { id: `msg_${randomUUID()}`, webhookId: a.id, keyHash, email: 0, dueAt: now, expiresAt: emails[0].expiresAt },
        { id: `msg_${randomUUID()}`, webhookId: b.id, keyHash, email: 0, dueAt: now, expiresAt: emails[0].expiresAt },
        { id: `msg_${randomUUID()}`, webhookId: a.id, keyHash, email: 1, dueAt: now, expiresAt: emails[1].expiresAt },
      ];
      const events: MailEvents = { jobs, bodies: new Map([[0, ['{"id":"', '","url":"/e/', '"}']], [1, ['{"id":"', '"}']]]), caps: { perKey: 10, perHook: 1 } };
      const stored = await store.addEmails(emails, events);
      assert.equal(stored.length, 2);
      for (const [i, e] of emails.entries()) assert.deepEqual((await store.listEmails(e.address, { limit: 10 }, now)).map((x) => x.id), [stored[i].id]);
      // a's second event is over its cap of one: refused, named with its email's id
      assert.deepEqual(events.dropped?.map((d) => [d.job.id, d.job.emailId, d.reason]), [[jobs[2].id, stored[1].id, 'hook_pending']]);
      const claimed = await w.claim(now + 1, 10_000, 10);
      assert.deepEqual(claimed.map((j) => [j.id, j.webhookId, j.emailId, j.keyHash, j.attempts, j.expiresAt, j.payload]).sort(), [
        [jobs[0].id, a.id, stored[0].id, keyHash, 0, emails[0].expiresAt, `{"id":"${stored[0].id}","url":"/e/${stored[0].id}"}`],
        [jobs[1].id, b.id, stored[0].id, keyHash, 0, emails[0].expiresAt, `{"id":"${stored[0].id}","url":"/e/${stored[0].id}"}`],
      ].sort());
      for (const j of claimed) await w.finish(j, j.webhookId, attempt(j, 1, 'delivered'), null);
      // no events: the mail alone
      const [plain] = await store.addEmails([newEmail(emails[0].address)], { jobs: [], bodies: new Map(), caps: ROOMY });
      assert.ok(plain.id > stored[0].id);
      assert.deepEqual(await w.claim(now + 3, 10_000, 10), []);
    });

    withStore('appendLog writes lines to a webhook\'s delivery log without touching its queue', async (store) => {
      const w = store.webhooks;
      const h = hook();
      await w.addWebhook(h, ADD);
      const j = job(h.id);
      const line: DeliveryAttempt = { jobId: j.id, emailId: j.emailId, attempt: 0, at: 5000, status: 'dropped', responseCode: null, error: 'not queued: over a limit', nextRetryAt: null };
      await w.appendLog([{ webhookId: h.id, attempt: line }, { webhookId: h.id, attempt: { ...line, at: 5001, jobId: 'msg_2' } }]);
      assert.deepEqual((await w.listAttempts(h.id, 10, 6000)).map((a) => [a.jobId, a.status, a.attempt]), [['msg_2', 'dropped', 0], [j.id, 'dropped', 0]]);
      assert.equal(await w.pendingCount(h.id), 0);
    });
  });

  // the webhook suite's keys too (it runs after the mail suite's cleanup)
  if (harness.cleanup) it(`${name}: webhook cleanup`, async () => harness.cleanup!());
}
