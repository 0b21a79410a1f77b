// Webhook fan-out over real sockets on SQLite (docs/push.md "Limits", docs/security.md 17): one
// message to 100 recipients with every webhook an attacker can register on them queues at most 100
// events, shared across keys; events over a key's or a webhook's pending cap are dropped, counted in
// /metrics and written in that webhook's delivery log, while another key's events go through.
// And the cap checks, which read before they write, never make a sender retry while mail is written.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WEBHOOK_FANOUT } from '../../src/domain/limits.ts';
import { expectError } from '../helpers/contract.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, message, sendRaw, toWire } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const json = { 'content-type': 'application/json' };
const body = (subject: string) => message({ From: 'Shop <a@sender.example>', Subject: subject }, 'Your code is 482913');

/** A metric's value from /metrics (0 when the series is absent). */
async function metric(svc: TestService, series: string): Promise<number> {
  const text = await (await svc.api('/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

async function mintKey(svc: TestService): Promise<string> {
  const res = await svc.api('/api/v1/keys', { method: 'POST' });
  assert.equal(res.status, 201);
  return (await res.json()).data.api_key;
}

function registerer(svc: TestService) {
  return (key: string, url: string, address: string) =>
    svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url, address }) });
}

describe('webhook fan-out: one message to 100 recipients', () => {
  let svc: TestService;
  let rx: Receiver;
  before(async () => {
    // the attacker gets as many keys as it wants (more than one /48 may mint): the bound must not depend on it
    svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '1000', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000' });
    rx = await startReceiver();
  });
  after(async () => {
    await svc.stop();
    await rx.close();
  });

  test('with every webhook an attacker can register on the recipients, at most 100 events are queued; the rest are dropped, counted and logged; a user\'s one webhook still gets its event', { timeout: 120_000 }, async () => {
    const register = registerer(svc);
    const addresses = Array.from({ length: 100 }, (_, i) => `fan${i}@ephemail.test`);
    // a user watches one of the addresses first
    const user = await mintKey(svc);
    assert.equal((await register(user, `${rx.url}/user`, addresses[0])).status, 201);

    // the attacker: 100 keys, each with its 10 webhooks on 10 of the recipients
    const keys = await Promise.all(Array.from({ length: 100 }, () => mintKey(svc)));
    const refused: Response[] = [];
    let created = 0;
    for (let batch = 0; batch < 100; batch += 10) {
      await Promise.all(keys.slice(batch, batch + 10).map(async (key, k) => {
        const i = batch + k;
        for (let j = 0; j < 10; j++) {
          const res = await register(key, `${rx.url}/k${i}/h${j}`, addresses[(i * 10 + j) % 100]);
          if (res.status === 201) created++;
          else refused.push(res);
        }
      }));
    }
    // every address may be watched by 10 webhooks, all keys together: the user's took one slot of fan0
    assert.equal(created, 999);
    assert.equal(refused.length, 1);
    await expectError(refused[0], 409, 'too_many_webhooks', svc.http.replace('127.0.0.1', 'localhost'), /fan0@ephemail\.test is already watched by 10 webhooks \(all keys together\)/);
    // nor can it watch the whole domain
    assert.equal((await register(keys[0], rx.url, '*@ephemail.test')).status, 403);

    const t0 = performance.now();
    const sent = await sendRaw(svc.smtpPort, { from: 'a@sender.example', to: addresses, body: body('to a hundred') });
    assert.equal(sent.data?.code, 250);
    assert.equal(sent.rcpt.filter((r) => r.code === 250).length, 100);
    // every queued event is delivered once (the receiver answers 200): wait until the worker has recorded them
    await rx.until(WEBHOOK_FANOUT.eventsPerMessage, 30_000);
    const ms = performance.now() - t0;
    await until(async () => (await metric(svc, 'ephemail_webhook_attempts_total{status="delivered"}')) >= WEBHOOK_FANOUT.eventsPerMessage, 'the deliveries are recorded');
    const queued = await metric(svc, 'ephemail_webhook_events_queued_total');
    const dropped = await metric(svc, 'ephemail_webhook_events_dropped_total{reason="message_limit"}');
    assert.equal(queued, 100, 'the documented bound: 100 events for the whole message');
    assert.equal(dropped, 900, 'the 1,000 matching webhooks less the 100 queued');
    assert.equal(await metric(svc, 'ephemail_webhook_attempts_total{status="delivered"}'), 100);
    assert.equal(rx.calls.length, 100, 'one POST per queued event, and no more');

    // shared across keys: the user's webhook (the oldest) got its event, and no key got two
    const perKey = new Map<string, number>();
    for (const c of rx.calls) {
      const who = c.url.split('/')[2];
      perKey.set(who, (perKey.get(who) ?? 0) + 1);
    }
    assert.equal(perKey.get('user'), 1, 'the user\'s one webhook is not crowded out');
    assert.equal(perKey.size, 100);
    assert.ok([...perKey.values()].every((n) => n === 1));
    console.log(`# one message to 100 recipients, 1,000 matching webhooks from 101 keys: ${queued} events queued, ${dropped} dropped, ${rx.calls.length} POSTs, all delivered in ${Math.round(ms)} ms`);

    // a dropped event is a line in its webhook's log; the key sees why
    const unlucky = Array.from({ length: 100 }, (_, i) => i).find((i) => !perKey.has(`k${i}`))!;
    const hooks = (await (await svc.api('/api/v1/webhooks', { headers: { authorization: `Bearer ${keys[unlucky]}` } })).json()).data;
    const log = await (await svc.api(`/api/v1/webhooks/${hooks[0].id}/deliveries`, { headers: { authorization: `Bearer ${keys[unlucky]}` } })).json();
    assert.equal(log.meta.pending, 0);
    assert.equal(log.data.length, 1);
    assert.deepEqual([log.data[0].status, log.data[0].attempt, log.data[0].response_code, log.data[0].next_retry_at], ['dropped', 0, null, null]);
    assert.match(log.data[0].error, /already queued 100 webhook events, the most one message may/);
    assert.match(log.data[0].event_id, /^msg_/);
  });
});

describe('webhook fan-out: events pending per webhook and per key', () => {
  let svc: TestService;
  let stuck: Receiver;
  let fine: Receiver;
  before(async () => {
    // deliveries to the stuck receiver hang (each holds a slot until the 10 s timeout): room for all of them
    svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_WEBHOOK_MAX_IN_FLIGHT: '1000' });
    stuck = await startReceiver(() => 0);
    fine = await startReceiver();
  });
  after(async () => {
    await svc.stop();
    await stuck.close();
    await fine.close();
  });

  test('a key whose receiver does not keep up: past 100 events pending on a webhook, or 200 on the key, new events for it are dropped, counted and logged; another key\'s go through', { timeout: 120_000 }, async () => {
    const register = registerer(svc);
    const key = await mintKey(svc);
    const other = await mintKey(svc);
    const auth = (k: string) => ({ authorization: `Bearer ${k}` });
    const hook = async (k: string, url: string, address: string) => (await (await register(k, url, address)).json()).data;
    const [a, b, c] = [await hook(key, stuck.url, 'slow-a@ephemail.test'), await hook(key, stuck.url, 'slow-b@ephemail.test'), await hook(key, stuck.url, 'slow-c@ephemail.test')];
    const d = await hook(other, fine.url, 'other-d@ephemail.test');

    // 100 messages to a and b: the key's 200 events all pending (the receiver never answers)
    const { client } = await SmtpClient.open(svc.smtpPort);
    const send = async (to: string[], subject: string) => {
      assert.equal((await client.cmd('MAIL FROM:<a@sender.example>')).code, 250);
      for (const t of to) assert.equal((await client.cmd(`RCPT TO:<${t}>`)).code, 250);
      assert.equal((await client.data(toWire(body(subject)))).code, 250);
    };
    try {
      await client.cmd('EHLO test.example');
      for (let i = 0; i < WEBHOOK_FANOUT.pendingPerHook; i++) await send(['slow-a@ephemail.test', 'slow-b@ephemail.test'], `m${i}`);
      const pending = async (h: { id: string }, k = key) => (await (await svc.api(`/api/v1/webhooks/${h.id}/deliveries`, { headers: auth(k) })).json()).meta.pending;
      assert.deepEqual([await pending(a), await pending(b), await pending(c)], [100, 100, 0]);
      assert.equal(await metric(svc, 'ephemail_webhook_events_dropped_total{reason="hook_pending"}'), 0);

      // one more to a (its webhook is full), c (its key is full) and d (another key)
      await send(['slow-a@ephemail.test', 'slow-c@ephemail.test', 'other-d@ephemail.test'], 'one more');
    } finally {
      await client.quit();
    }
    const [call] = await fine.until(1);
    assert.equal(JSON.parse(call.body).data.subject, 'one more', 'another key\'s event is delivered');
    assert.equal(await metric(svc, 'ephemail_webhook_events_dropped_total{reason="hook_pending"}'), 1);
    assert.equal(await metric(svc, 'ephemail_webhook_events_dropped_total{reason="key_pending"}'), 1);
    assert.equal(await metric(svc, 'ephemail_webhook_events_queued_total'), 201);

    const logOf = async (h: { id: string }) => (await (await svc.api(`/api/v1/webhooks/${h.id}/deliveries`, { headers: auth(key) })).json());
    const la = await logOf(a);
    assert.equal(la.meta.pending, 100);
    // one dropped line; on a loaded machine the first hanging deliveries may have timed out (retrying) since
    const droppedA = la.data.filter((x: any) => x.status === 'dropped');
    assert.deepEqual(droppedA.map((x: any) => [x.status, x.attempt]), [['dropped', 0]]);
    assert.match(droppedA[0].error, /this webhook already has 100 events waiting for delivery/);
    const lc = await logOf(c);
    assert.equal(lc.meta.pending, 0);
    assert.deepEqual(lc.data.map((x: any) => x.status), ['dropped']);
    assert.match(lc.data[0].error, /this key's webhooks already have 200 events waiting for delivery/);
    const ld = await (await svc.api(`/api/v1/webhooks/${d.id}/deliveries`, { headers: auth(other) })).json();
    assert.ok(ld.data.every((x: any) => x.status !== 'dropped'));
  });
});

describe('webhook events queued while mail is written (SQLite)', () => {
  let svc: TestService;
  let rx: Receiver;
  before(async () => {
    svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true' });
    rx = await startReceiver();
  });
  after(async () => {
    await svc.stop();
    await rx.close();
  });

  test('10 connections sending at once to watched inboxes: every message gets its 250 and its event (the cap check never makes a sender retry)', { timeout: 120_000 }, async () => {
    const register = registerer(svc);
    const key = await mintKey(svc);
    for (let i = 0; i < 10; i++) assert.equal((await register(key, rx.url, `busy${i}@ephemail.test`)).status, 201);
    const codes = await Promise.all(Array.from({ length: 10 }, async (_, c) => {
      const { client } = await SmtpClient.open(svc.smtpPort);
      const out: number[] = [];
      try {
        await client.cmd('EHLO test.example');
        for (let m = 0; m < 60; m++) {
          await client.cmd('MAIL FROM:<a@sender.example>');
          await client.cmd(`RCPT TO:<busy${(c + m) % 10}@ephemail.test>`);
          out.push((await client.data(toWire(body(`c${c} m${m}`)))).code);
        }
      } finally {
        await client.quit();
      }
      return out;
    }));
    assert.deepEqual(codes.flat().filter((c) => c !== 250), [], 'no 451');
    await rx.until(600, 60_000);
  });
});
