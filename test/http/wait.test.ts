// Long-poll `wait` (spec: GET /inboxes/{address}/emails rules 3-4, Limits; docs/contract-decisions.md shutdown).
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { sendRaw, message } from '../helpers/smtp.ts';
import { expectError, expectLimitHeaders, expectSummary } from '../helpers/contract.ts';

const baseOf = (svc: TestService) => svc.http.replace('127.0.0.1', 'localhost');
const mint = async (svc: TestService) => (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
/** Until `n` requests are held by the service (subscribed, first query empty): mail sent now wakes them. */
const heldOn = (s: TestService, n: number) => until(() => s.service.core.waits.held >= n, `${n} requests are held`);
const mail = (svc: TestService, to: string, subject: string) =>
  sendRaw(svc.smtpPort, { from: 'w@waiter.example', to: [to], body: message({ From: 'w@waiter.example', To: to, Subject: subject }, 'body') });

describe('wait', () => {
  let svc: TestService;
  let key: string;
  let key2: string;
  before(async () => {
    svc = await startService();
    key = await mint(svc);
    key2 = await mint(svc);
  });
  after(() => svc.stop());
  const waitFor = (address: string, q: string, k = key, init: RequestInit = {}) =>
    svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?${q}`, { ...init, headers: { authorization: `Bearer ${k}` } });

  test('wait without a key → 401 key_required', async () => {
    const res = await svc.api('/api/v1/inboxes/w1%40ephemail.test/emails?wait=5');
    expectLimitHeaders(res);
    const e = await expectError(res, 401, 'key_required', baseOf(svc));
    assert.match(e.message, /key/i);
    // wait=0 needs no key
    assert.equal((await svc.api('/api/v1/inboxes/w1%40ephemail.test/emails?wait=0')).status, 200);
  });

  test('with a key, a bad address or cursor is answered at once, not after the wait', async () => {
    const t0 = Date.now();
    await expectError(await waitFor('x@gmail.com', 'wait=10'), 404, 'not_found', baseOf(svc));
    await expectError(await waitFor('not-an-address', 'wait=10'), 400, 'invalid_request', baseOf(svc));
    await expectError(await waitFor('ok@ephemail.test', 'wait=10&since=nope'), 400, 'invalid_request', baseOf(svc), /since/);
    // bound: a bad request is answered before the 10 s wait: one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 8000);
    // and none of them kept a wait slot
    const all = await Promise.all(Array.from({ length: 5 }, (_, i) => waitFor(`free${i}@ephemail.test`, 'wait=1')));
    assert.deepEqual(all.map((r) => r.status), [200, 200, 200, 200, 200]);
  });

  test('a held list or latest checks its inbox once (before its wait slot), not again in the service', async () => {
    const domains = svc.service.core.domains;
    const stateOf = domains.stateOf;
    let looked = 0;
    domains.stateOf = (d) => {
      looked++;
      return stateOf.call(domains, d);
    };
    try {
      for (const path of ['emails', 'latest']) {
        looked = 0;
        const res = await svc.api(`/api/v1/inboxes/once-${path}%40ephemail.test/${path}?wait=1`, { headers: { authorization: `Bearer ${key}` } });
        assert.equal(res.status, 200);
        assert.equal(looked, 1, `${path}: the inbox's domain looked up ${looked} times`);
      }
    } finally {
      domains.stateOf = stateOf;
    }
  });

  test('a wait is woken by mail sent over SMTP and returns it well before the deadline', async () => {
    const address = 'woken@ephemail.test';
    const t0 = Date.now();
    const pending = waitFor(address, 'wait=20');
    await heldOn(svc, 1);
    const r = await mail(svc, address, 'wake up');
    assert.equal(r.data?.code, 250);
    const acked = Date.now();
    const res = await pending;
    const elapsedAfterSend = Date.now() - acked; // the wake-up is published before the 250, so this is ~0
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const body = await res.json();
    assert.equal(body.data.length, 1);
    expectSummary(body.data[0]);
    assert.equal(body.data[0].subject, 'wake up');
    assert.equal(body.meta.waited, true);
    assert.equal(body.meta.count, 1);
    assert.equal(body.meta.next_since, body.data[0].id);
    // bound: woken by the delivery, not the 20 s deadline: one-sided, generous for a loaded machine
    assert.ok(elapsedAfterSend < 10_000, `answered ${elapsedAfterSend} ms after the 250`);
    // bound: well before the 20 s deadline: one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 15_000);
  });

  test('the wake-up ignores case: wait on MiXeD path, mail to UPPER recipient', async () => {
    const pending = waitFor('Case.Wait@EPHEMAIL.test', 'wait=20');
    await heldOn(svc, 1);
    const t0 = Date.now();
    const r = await mail(svc, 'CASE.WAIT@ephemail.TEST', 'cased');
    assert.equal(r.data?.code, 250);
    const body = await (await pending).json();
    // bound: woken by the delivery, not the 20 s deadline: one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 15_000, 'well before the 20 s deadline');
    assert.equal(body.meta.address, 'case.wait@ephemail.test');
    assert.deepEqual(body.data.map((e: any) => e.subject), ['cased']);
  });

  test('one transaction to several inboxes wakes each waiter', async () => {
    const addrs = ['fan1@ephemail.test', 'fan2@ephemail.test'];
    const pending = [waitFor(addrs[0], 'wait=20'), waitFor(addrs[1], 'wait=20', key2)];
    await heldOn(svc, 2);
    const r = await sendRaw(svc.smtpPort, { from: 'f@fan.example', to: addrs, body: message({ From: 'f@fan.example', Subject: 'fan' }, 'x') });
    assert.equal(r.data?.code, 250);
    const bodies = await Promise.all(pending.map(async (p) => (await p).json()));
    for (const [i, b] of bodies.entries()) {
      assert.equal(b.data.length, 1);
      assert.equal(b.data[0].address, addrs[i]);
    }
  });

  test('wait with since: only newer mail wakes it', async () => {
    const address = 'since-wait@ephemail.test';
    await mail(svc, address, 'old');
    const first = await (await waitFor(address, 'wait=5')).json();
    assert.equal(first.data.length, 1, 'existing mail returns at once');
    assert.equal(first.meta.waited, false);
    const pending = waitFor(address, `wait=20&since=${first.meta.next_since}`);
    await heldOn(svc, 1);
    await mail(svc, address, 'new');
    const body = await (await pending).json();
    assert.deepEqual(body.data.map((e: any) => e.subject), ['new']);
    assert.equal(body.meta.waited, true);
  });

  test('mail for another address does not end the wait', async () => {
    const t0 = Date.now();
    const pending = waitFor('quiet@ephemail.test', 'wait=2');
    await heldOn(svc, 1);
    await mail(svc, 'noisy@ephemail.test', 'not for you');
    const res = await pending;
    const body = await res.json();
    assert.deepEqual(body.data, []);
    assert.equal(body.meta.waited, true);
    // bound: the wait ran to its 2 s deadline (a lower bound: a loaded machine only makes it longer)
    assert.ok(Date.now() - t0 >= 1900);
  });

  test('timeout returns empty data with meta.waited true', async () => {
    const t0 = Date.now();
    const res = await waitFor('timeout@ephemail.test', 'wait=1');
    const took = Date.now() - t0;
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { data: [], meta: { address: 'timeout@ephemail.test', count: 0, next_since: null, next_before: null, waited: true } });
    // bound: the 1 s wait ran out: lower bound exact, upper bound generous for a loaded machine
    assert.ok(took >= 950 && took < 10_000, `took ${took}`);
  });

  test('6th concurrent wait on a key → 429 too_many_waiters; other keys unaffected; slots free after', async () => {
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const held = controllers.map((c, i) => waitFor(`slot${i}@ephemail.test`, 'wait=20', key, { signal: c.signal }).catch(() => null));
    await heldOn(svc, 5);
    const sixth = await waitFor('slot5@ephemail.test', 'wait=20');
    expectLimitHeaders(sixth);
    await expectError(sixth, 429, 'too_many_waiters', baseOf(svc));
    // wait=0 on the same key is not a waiter
    assert.equal((await waitFor('slot5@ephemail.test', 'wait=0')).status, 200);
    // a different key has its own slots
    const other = waitFor('other@ephemail.test', 'wait=1', key2);
    assert.equal((await other).status, 200);
    for (const c of controllers) c.abort();
    await Promise.all(held);
    // the server notices the disconnects and frees the slots
    await until(() => svc.service.core.waits.held === 0, 'the server noticed the disconnects', 2000);
    const res = await waitFor('after@ephemail.test', 'wait=1');
    assert.equal(res.status, 200, 'a later wait succeeds once the clients have gone');
    await res.arrayBuffer();
    // all five again
    const again = await Promise.all(Array.from({ length: 5 }, (_, i) => waitFor(`again${i}@ephemail.test`, 'wait=1')));
    assert.deepEqual(again.map((r) => r.status), [200, 200, 200, 200, 200]);
  });

  test('a client that disconnects frees its slot at once (raw socket close)', async () => {
    const s = await startService({ EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: '1' });
    try {
      const k = await mint(s);
      const u = new URL(s.http);
      const req = httpRequest({ host: u.hostname, port: u.port, path: '/api/v1/inboxes/dc%40ephemail.test/emails?wait=30', headers: { 'x-api-key': k } });
      req.on('error', () => undefined);
      req.end();
      await heldOn(s, 1);
      const blocked = await s.api('/api/v1/inboxes/dc2%40ephemail.test/emails?wait=1', { headers: { 'x-api-key': k } });
      await expectError(blocked, 429, 'too_many_waiters', baseOf(s));
      req.destroy();
      await until(() => s.service.core.waits.held === 0, 'the held poll ended with its client (long before its 30 s)', 3000);
      const res = await s.api('/api/v1/inboxes/dc2%40ephemail.test/emails?wait=1', { headers: { 'x-api-key': k } });
      assert.equal(res.status, 200);
    } finally {
      await s.stop();
    }
  });
});

describe('many waiters', () => {
  test('one mail wakes every waiter on its address, across keys; others keep waiting', async () => {
    const s = await startService({ EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '20' });
    try {
      const keys = await Promise.all(Array.from({ length: 4 }, () => mint(s)));
      const on = (address: string, k: string, wait = 20) =>
        s.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?wait=${wait}`, { headers: { 'x-api-key': k } });
      const same = keys.flatMap((k) => [on('shared@ephemail.test', k), on('shared@ephemail.test', k)]);
      const other = keys.map((k) => on('elsewhere@ephemail.test', k, 2));
      await heldOn(s, 12);
      assert.equal(s.service.core.waits.held, 12);
      const t0 = Date.now();
      await mail(s, 'shared@ephemail.test', 'for all');
      const bodies = await Promise.all(same.map(async (p) => (await p).json()));
      // bound: woken by the delivery, not the 20 s deadline: one-sided, generous for a loaded machine
      assert.ok(Date.now() - t0 < 15_000, `all woken in ${Date.now() - t0} ms, well before the 20 s deadline`);
      for (const b of bodies) assert.deepEqual(b.data.map((e: any) => e.subject), ['for all']);
      const rest = await Promise.all(other.map(async (p) => (await p).json()));
      for (const b of rest) assert.deepEqual([b.data, b.meta.waited], [[], true]);
    } finally {
      await s.stop();
    }
  });
});

describe('shutdown answers held polls', () => {
  test('service.stop() answers a held wait promptly with its empty result', async () => {
    const s = await startService();
    const k = await mint(s);
    const pending = s.api('/api/v1/inboxes/held%40ephemail.test/emails?wait=30', { headers: { authorization: `Bearer ${k}` } });
    await heldOn(s, 1);
    const t0 = Date.now();
    const stopping = s.stop();
    const res = await pending;
    const answeredIn = Date.now() - t0;
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(body.data, []);
    assert.equal(body.meta.waited, true);
    await stopping;
    // bound: stop() answers a 30 s wait at once: one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 15_000, `stop finished in ${Date.now() - t0} ms`);
    // bound: answered by stop(), not the 30 s deadline: one-sided, generous
    assert.ok(answeredIn < 15_000, `answered in ${answeredIn} ms`);
  });
});
