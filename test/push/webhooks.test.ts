// Webhooks over real sockets on SQLite: registration and its refusals, a receiver on
// loopback that fails twice and gets the third attempt with a signature that verifies with the
// standardwebhooks package, the delivery log, the SSRF guard (no connection is ever made to a refused
// address), and deliveries that survive the process being killed.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { checkDestination, postWebhook } from '../../src/services/webhook-send.ts';
import { ISO_UTC, expectError } from '../helpers/contract.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/time.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { startNode } from '../redis/nodes.ts';

const json = { 'content-type': 'application/json' };
const mail = (port: number, to: string, subject: string) =>
  sendRaw(port, { from: 'a@sender.example', to: [to], body: message({ From: 'Shop <a@sender.example>', Subject: subject }, 'Your code is 482913') });

describe('webhooks (loopback allowed by the operator)', () => {
  let svc: TestService;
  let key: string;
  let base: string;
  before(async () => {
    // the operator allows *@<domain> here (all mail on these domains is theirs)
    svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_WEBHOOK_WILDCARD: 'true', EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '10' });
    base = svc.http.replace('127.0.0.1', 'localhost');
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());
  const auth = (k = key) => ({ authorization: `Bearer ${k}` });
  const register = (body: unknown, k = key) => svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, ...auth(k) }, body: JSON.stringify(body) });

  test('a receiver that fails its first two calls gets the third; the signature verifies; the log shows all three', async () => {
    const rx = await startReceiver((n) => (n < 2 ? 500 : 204));
    try {
      const res = await register({ url: rx.url, address: 'Hooked@ephemail.test' });
      assert.equal(res.status, 201);
      const hook = (await res.json()).data;
      assert.match(hook.id, /^wh_/);
      assert.match(hook.secret, /^whsec_/);
      assert.equal(hook.address, 'hooked@ephemail.test');
      assert.match(hook.created_at, ISO_UTC);

      const t0 = Date.now();
      assert.equal((await mail(svc.smtpPort, 'hooked@ephemail.test', 'Verify your account')).data?.code, 250);
      const calls = await rx.until(3, 15_000);
      // bound: the first retries come about 1 s and 2 s apart (the schedule is the behaviour); one-sided, generous
      assert.ok(Date.now() - t0 < 12_000, 'three attempts within the first retries (about 1 s and 2 s apart)');
      // one event: the same webhook-id on every attempt, each signed afresh
      const ids = new Set(calls.map((c) => c.headers['webhook-id']));
      assert.equal(ids.size, 1);
      const wh = new Webhook(hook.secret);
      for (const c of calls) {
        const verified = wh.verify(c.body, c.headers as Record<string, string>) as any;
        assert.equal(verified.type, 'email.received');
      }
      assert.throws(() => new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(calls[2].body, calls[2].headers as Record<string, string>), 'another secret does not verify');
      const event = JSON.parse(calls[2].body);
      assert.equal(event.data.address, 'hooked@ephemail.test');
      assert.equal(event.data.subject, 'Verify your account');
      assert.equal(event.data.url, `${base}/api/v1/emails/${event.data.id}`);
      assert.equal(event.data.raw_url, `${base}/api/v1/emails/${event.data.id}/raw`);
      assert.equal(event.data.web_url, `${base}/inbox/hooked@ephemail.test`);
      const email = await svc.api(`/api/v1/emails/${event.data.id}`);
      assert.equal(email.status, 200, 'the event names a stored email');

      // the log is written after each attempt: wait for the third record
      let log: any;
      await until(async () => {
        log = await (await svc.api(`/api/v1/webhooks/${hook.id}/deliveries`, { headers: auth() })).json();
        return log.data.length === 3;
      }, 'the log has its third record', 5000, 50);
      assert.deepEqual(log.data.map((d: any) => d.status), ['delivered', 'retrying', 'retrying']);
      assert.deepEqual(log.data.map((d: any) => d.response_code), [204, 500, 500]);
      assert.deepEqual(log.data.map((d: any) => d.attempt), [3, 2, 1]);
      assert.equal(log.data[0].next_retry_at, null);
      for (const d of log.data.slice(1)) assert.match(d.next_retry_at, ISO_UTC);
      assert.equal(log.data[0].event_id, calls[0].headers['webhook-id']);
      assert.equal(log.data[0].email_id, event.data.id);
      assert.equal(log.meta.pending, 0);
      // delivered once: no fourth call
      await new Promise((r) => setTimeout(r, 1500)); // quiet window: a fourth call would come in these 1.5 s
      assert.equal(rx.calls.length, 3);
      // the queue shows in the metrics
      const metrics = await (await svc.api('/metrics')).text();
      assert.match(metrics, /^ephemail_webhook_attempts_total\{status="delivered"\} [1-9]/m);
      assert.match(metrics, /^ephemail_webhook_attempts_total\{status="retrying"\} [2-9]/m);
      assert.match(metrics, /^ephemail_webhook_attempt_seconds_count [3-9]/m);
      assert.match(metrics, /^ephemail_webhook_deliveries_in_flight 0/m);
    } finally {
      await rx.close();
    }
  });

  test('*@<domain> gets every inbox of the domain; an inbox webhook only its own', async () => {
    const all = await startReceiver();
    const one = await startReceiver();
    try {
      assert.equal((await register({ url: all.url, address: '*@ephemail.test' })).status, 201);
      assert.equal((await register({ url: one.url, address: 'only@ephemail.test' })).status, 201);
      await mail(svc.smtpPort, 'only@ephemail.test', 'a');
      await mail(svc.smtpPort, 'other@ephemail.test', 'b');
      await all.until(2);
      await one.until(1);
      await new Promise((r) => setTimeout(r, 500)); // quiet window: a call to the wrong receiver would come in these 500 ms
      assert.deepEqual(all.calls.map((c) => JSON.parse(c.body).data.address).sort(), ['only@ephemail.test', 'other@ephemail.test']);
      assert.deepEqual(one.calls.map((c) => JSON.parse(c.body).data.address), ['only@ephemail.test']);
    } finally {
      await all.close();
      await one.close();
    }
  });

  test('registration errors: a key is needed, bad fields are named, other keys see nothing', async () => {
    await expectError(await svc.api('/api/v1/webhooks', { method: 'POST', headers: json, body: JSON.stringify({ url: 'http://127.0.0.1:9/', address: 'x@ephemail.test' }) }), 401, 'key_required', base);
    await expectError(await svc.api('/api/v1/webhooks'), 401, 'key_required', base);
    await expectError(await register({ url: 'ftp://127.0.0.1/', address: 'x@ephemail.test' }), 400, 'invalid_request', base, /http or https/);
    await expectError(await register({ url: 'not a url', address: 'x@ephemail.test' }), 400, 'invalid_request', base, /absolute URL/);
    await expectError(await register({ url: 'http://127.0.0.1:9/', address: 'x@gmail.com' }), 400, 'invalid_request', base, /not a domain of this service/);
    await expectError(await register({ url: 'http://127.0.0.1:9/', address: '*@gmail.com' }), 400, 'invalid_request', base, /not a domain of this service/);
    await expectError(await register({ url: 'http://127.0.0.1:9/' }), 400, 'invalid_request', base, /address/);
    await expectError(await register({ url: 'http://127.0.0.1:9/', address: 'x@ephemail.test', extra: 1 }), 400, 'invalid_request', base);

    const other = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    const mine = (await (await register({ url: 'http://127.0.0.1:9/mine', address: 'mine@ephemail.test' })).json()).data;
    const listed = await (await svc.api('/api/v1/webhooks', { headers: auth() })).json();
    assert.ok(listed.data.some((w: any) => w.id === mine.id && w.url === 'http://127.0.0.1:9/mine'));
    for (const w of listed.data) assert.equal(w.secret, undefined, 'the secret is shown only at creation');
    assert.equal(listed.meta.count, listed.data.length);
    assert.deepEqual((await (await svc.api('/api/v1/webhooks', { headers: auth(other) })).json()).data, []);
    await expectError(await svc.api(`/api/v1/webhooks/${mine.id}`, { method: 'DELETE', headers: auth(other) }), 404, 'not_found', base);
    await expectError(await svc.api(`/api/v1/webhooks/${mine.id}/deliveries`, { headers: auth(other) }), 404, 'not_found', base);
    const del = await svc.api(`/api/v1/webhooks/${mine.id}`, { method: 'DELETE', headers: auth() });
    assert.equal(del.status, 204);
    assert.equal(await del.text(), '');
    await expectError(await svc.api(`/api/v1/webhooks/${mine.id}`, { method: 'DELETE', headers: auth() }), 404, 'not_found', base);
  });

  test('ten webhooks per key; the eleventh is refused with too_many_webhooks', async () => {
    const k = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    for (let i = 0; i < 10; i++) assert.equal((await register({ url: `http://127.0.0.1:9/${i}`, address: `n${i}@ephemail.test` }, k)).status, 201);
    await expectError(await register({ url: 'http://127.0.0.1:9/10', address: 'n10@ephemail.test' }, k), 409, 'too_many_webhooks', base);
    const first = (await (await svc.api('/api/v1/webhooks', { headers: auth(k) })).json()).data[0];
    assert.equal((await svc.api(`/api/v1/webhooks/${first.id}`, { method: 'DELETE', headers: auth(k) })).status, 204);
    assert.equal((await register({ url: 'http://127.0.0.1:9/10', address: 'n10@ephemail.test' }, k)).status, 201);
  });

  test('a deleted webhook gets nothing more: its pending retries are dropped', async () => {
    const rx = await startReceiver(() => 500);
    try {
      const hook = (await (await register({ url: rx.url, address: 'gone@ephemail.test' })).json()).data;
      await mail(svc.smtpPort, 'gone@ephemail.test', 'x');
      await rx.until(1);
      assert.equal((await svc.api(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE', headers: auth() })).status, 204);
      const n = rx.calls.length;
      await new Promise((r) => setTimeout(r, 3000)); // quiet window: the next retries (about 1 s, 2 s) would come in these 3 s
      assert.equal(rx.calls.length, n, 'no retry after the webhook was deleted');
    } finally {
      await rx.close();
    }
  });
});

describe('webhooks: *@<domain> is off unless the operator allows it (the default)', () => {
  let svc: TestService;
  let key: string;
  let base: string;
  before(async () => {
    svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true' });
    base = svc.http.replace('127.0.0.1', 'localhost');
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());
  const auth = () => ({ authorization: `Bearer ${key}` });

  test('a free key registering *@<domain> gets 403 forbidden saying why and what to do; nothing is registered', async () => {
    for (const address of ['*@ephemail.test', '*@EPHEMAIL.test', ' *@ephemail.test']) {
      const res = await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, ...auth() }, body: JSON.stringify({ url: 'http://93.184.215.14/hook', address }) });
      const err = await expectError(res, 403, 'forbidden', base, /every inbox/);
      assert.match(err.message, /EPHEMAIL_WEBHOOK_WILDCARD=true/, 'names the operator\'s setting');
      assert.match(err.message, /one inbox address instead/, 'says what the caller can do');
    }
    assert.deepEqual((await (await svc.api('/api/v1/webhooks', { headers: auth() })).json()).data, []);
    // an inbox webhook on the same domain is fine
    assert.equal((await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, ...auth() }, body: JSON.stringify({ url: 'http://93.184.215.14/hook', address: 'mine@ephemail.test' }) })).status, 201);
  });

  test('a *@<domain> webhook already in the store (made while it was allowed) gets no event once it is off', async () => {
    const all = await startReceiver();
    const one = await startReceiver();
    try {
      const keyHash = (await svc.service.core.keys.findKey(createHash('sha256').update(key).digest('hex')))!.hash;
      const wild = { id: 'wh_storedwildcard', keyHash, url: all.url, target: '*@ephemail.test', secret: `whsec_${Buffer.alloc(24, 1).toString('base64')}`, createdAt: Date.now() };
      await svc.service.store.webhooks.addWebhook(wild, { perKey: 10, perTarget: 10 });
      assert.ok((await (await svc.api('/api/v1/webhooks', { headers: auth() })).json()).data.some((w: any) => w.id === wild.id && w.address === '*@ephemail.test'));
      const own = (await (await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, ...auth() }, body: JSON.stringify({ url: one.url, address: 'watched@ephemail.test' }) })).json()).data;
      assert.equal((await mail(svc.smtpPort, 'watched@ephemail.test', 'for the inbox webhook')).data?.code, 250);
      assert.equal((await mail(svc.smtpPort, 'someone-else@ephemail.test', 'not for anyone')).data?.code, 250);
      await one.until(1);
      // both emails were queued in the same way as the inbox webhook's event: none for the wildcard
      const log = await (await svc.api(`/api/v1/webhooks/${wild.id}/deliveries`, { headers: auth() })).json();
      assert.deepEqual([log.data, log.meta.pending], [[], 0]);
      assert.equal(all.calls.length, 0);
      assert.equal(JSON.parse(one.calls[0].body).data.subject, 'for the inbox webhook');
      assert.ok(own.id);
    } finally {
      await all.close();
      await one.close();
    }
  });
});

describe('webhooks: SSRF guard (the default)', () => {
  let svc: TestService;
  let key: string;
  let base: string;
  before(async () => {
    svc = await startService();
    base = svc.http.replace('127.0.0.1', 'localhost');
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());

  test('metadata, private, loopback and link-local receivers are refused at registration, before any connection', async () => {
    const rx = await startReceiver();
    try {
      const urls = [
        'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', 'http://192.168.1.1/', 'http://172.16.0.1/', 'http://100.64.0.1/',
        `http://127.0.0.1:${rx.port}/hook`, `http://[::1]:${rx.port}/`, `http://[::ffff:127.0.0.1]:${rx.port}/`, 'http://[fd00:ec2::254]/',
        'http://0.0.0.0/', 'http://2130706433/', `http://localhost:${rx.port}/`, 'https://[fe80::1]/',
      ];
      for (const url of urls) {
        const res = await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url, address: 'x@ephemail.test' }) });
        await expectError(res, 400, 'invalid_request', base, /not a public address/);
      }
      assert.equal(rx.connections, 0, 'no connection to a refused address');
    } finally {
      await rx.close();
    }
  });

  test('at delivery, the name is resolved and checked again and the connection goes to the checked address (DNS rebinding)', async () => {
    const rx = await startReceiver();
    try {
      // the name looked public when it was registered and points at loopback now
      let answer = '93.184.215.14';
      const resolve = async () => [{ address: answer, family: 4 }];
      assert.equal(await checkDestination(`http://rebind.example:${rx.port}/`, false, resolve), null);
      answer = '127.0.0.1';
      const r = await postWebhook(`http://rebind.example:${rx.port}/hook`, {}, '{}', { allowPrivate: false, timeoutMs: 2000, resolve });
      assert.equal(r.refused, true);
      assert.match(r.error ?? '', /127\.0\.0\.1 is not a public address/);
      // one private address among public ones is enough to refuse
      const mixed = async () => [{ address: '93.184.215.14', family: 4 }, { address: '10.1.2.3', family: 4 }];
      assert.equal((await postWebhook(`http://mixed.example:${rx.port}/`, {}, '{}', { allowPrivate: false, timeoutMs: 2000, resolve: mixed })).refused, true);
      assert.equal(rx.connections, 0, 'no connection was made');
      // allowed by the operator: the same name reaches the receiver on the address it resolved to
      const ok = await postWebhook(`http://rebind.example:${rx.port}/hook`, {}, '{}', { allowPrivate: true, timeoutMs: 2000, resolve });
      assert.equal(ok.status, 200);
      assert.equal(rx.calls.length, 1);
      assert.equal(rx.calls[0].headers.host, `rebind.example:${rx.port}`);
    } finally {
      await rx.close();
    }
  });
});

describe('webhooks: a killed process loses no delivery', () => {
  test('SIGKILL with a delivery pending: the next start delivers it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ephemail-wh-'));
    const env = { EPHEMAIL_STORE: `sqlite:${join(dir, 'wh.db')}`, EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_LOG_LEVEL: 'info' };
    let rx = await startReceiver(() => 503);
    const port = rx.port;
    let node = await startNode('first', env);
    let second: Awaited<ReturnType<typeof startNode>> | null = null;
    try {
      const key = (await (await node.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
      const hook = (await (await node.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url: rx.url, address: 'durable@ephemail.test' }) })).json()).data;
      assert.equal((await node.send('durable@ephemail.test', 'kept across a crash')).response.slice(0, 3), '250');
      await rx.until(1);
      await node.kill();
      await rx.close();
      rx = await startReceiver(() => 200, port); // the receiver is back, on the same port
      second = await startNode('second', env);
      const calls = await rx.until(1, 20_000);
      const event = JSON.parse(calls[0].body);
      assert.equal(event.data.subject, 'kept across a crash');
      assert.ok(new Webhook(hook.secret).verify(calls[0].body, calls[0].headers as Record<string, string>));
    } finally {
      await node.kill();
      if (second) await second.stop();
      await rx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('webhooks: a stopped service keeps no connection open', () => {
  test('the keep-alive connection to a receiver is closed when the service stops (not left to idle out)', async () => {
    // the receiver would keep an idle connection for a minute: only the sender can close it sooner
    const rx = await startReceiver(() => 204, 0, 60_000);
    const svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true' });
    let stopped = false;
    try {
      const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
      const res = await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url: rx.url, address: 'kept@ephemail.test' }) });
      assert.equal(res.status, 201);
      assert.equal((await mail(svc.smtpPort, 'kept@ephemail.test', 'one event')).data?.code, 250);
      await rx.until(1);
      assert.equal(rx.open, 1, 'the delivery\'s connection is kept alive for the next one');
      await svc.stop();
      stopped = true;
      await until(() => rx.open === 0, 'the stopped service closed its kept-alive connection');
    } finally {
      if (!stopped) await svc.stop();
      await rx.close();
    }
  });
});
