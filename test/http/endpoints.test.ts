// Every endpoint of the spec's Endpoints table (except /mcp), over real sockets: status codes, the
// data/meta shapes and field types exactly as spec + docs/contract-decisions.md.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw, message } from '../helpers/smtp.ts';
import { ISO_UTC, expectError, expectFull, expectKeys, expectLimitHeaders, expectSummary, listAll } from '../helpers/contract.ts';

let svc: TestService;
const DOMAINS = ['ephemail.test', 'second.example'];
const json = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

before(async () => {
  svc = await startService({
    EPHEMAIL_DOMAINS: DOMAINS.join(','),
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '100000',
    EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '100',
  });
});
after(() => svc.stop());

const base = () => svc.http.replace('127.0.0.1', 'localhost');

describe('service endpoints', () => {
  test('GET /api/v1: endpoint index, docs links, TTL', async () => {
    const res = await svc.api('/api/v1');
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const body = await res.json();
    expectKeys(body, ['data']);
    const d = body.data;
    assert.equal(d.email_ttl_seconds, 3600);
    assert.ok(Array.isArray(d.endpoints));
    const have = new Set(d.endpoints.map((e: any) => `${e.method} ${e.path}`));
    for (const ep of [
      'GET /api/v1', 'GET /api/v1/openapi.json', 'GET /api/v1/health', 'POST /api/v1/keys', 'GET /api/v1/me', 'GET /api/v1/domains',
      'POST /api/v1/inboxes', 'GET /api/v1/inboxes/{address}/emails', 'DELETE /api/v1/inboxes/{address}/emails', 'GET /api/v1/emails/{id}',
      'DELETE /api/v1/emails/{id}', 'GET /api/v1/emails/{id}/attachments', 'GET /api/v1/emails/{id}/attachments/{attachment_id}',
    ]) assert.ok(have.has(ep), `index lists ${ep}`);
    assert.equal(d.docs.html, `${base()}/docs`);
    assert.equal(d.docs.openapi, `${base()}/api/v1/openapi.json`);
  });

  test('GET /api/v1/health', async () => {
    const res = await svc.api('/api/v1/health');
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    assert.deepEqual(await res.json(), { data: { status: 'ok', database: 'connected', smtp: 'running' } });
  });

  test('GET /api/v1/domains: data + meta.count, default first', async () => {
    const res = await svc.api('/api/v1/domains');
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    assert.deepEqual(await res.json(), { data: DOMAINS.map((domain) => ({ domain })), meta: { count: 2 } });
  });
});

describe('POST /api/v1/keys and GET /api/v1/me', () => {
  test('key: eph_ + 40 base62, prefix is its first 12 chars, every field typed', async () => {
    const res = await svc.api('/api/v1/keys', json({ label: 'ci runner', contact_email: 'ops@example.org' }));
    assert.equal(res.status, 201);
    expectLimitHeaders(res);
    const body = await res.json();
    expectKeys(body, ['data']);
    const k = body.data;
    expectKeys(k, ['api_key', 'key_prefix', 'label', 'tier', 'limits', 'created_at', 'warning'], 'key');
    assert.match(k.api_key, /^eph_[0-9A-Za-z]{40}$/);
    assert.equal(k.key_prefix, k.api_key.slice(0, 12));
    assert.equal(k.label, 'ci runner');
    assert.equal(k.tier, 'free');
    assert.deepEqual(k.limits, { requests_per_minute: 300, requests_per_day: 10000, concurrent_waits: 5 });
    assert.match(k.created_at, ISO_UTC);
    assert.ok(Math.abs(Date.parse(k.created_at) - Date.now()) < 10_000);
    assert.equal(typeof k.warning, 'string');
    assert.ok(k.warning.length > 0);
  });

  test('label omitted → "" (no body, empty JSON object, empty body with JSON content type)', async () => {
    for (const init of [{ method: 'POST' }, json({}), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' }] as RequestInit[]) {
      const res = await svc.api('/api/v1/keys', init);
      const text = await res.text();
      assert.equal(res.status, 201, text);
      assert.equal(JSON.parse(text).data.label, '');
    }
  });

  test('two keys differ', async () => {
    const a = (await (await svc.api('/api/v1/keys', json({}))).json()).data.api_key;
    const b = (await (await svc.api('/api/v1/keys', json({}))).json()).data.api_key;
    assert.notEqual(a, b);
  });

  test('anonymous identity: key_prefix and label null, concurrent_waits 0', async () => {
    const res = await svc.api('/api/v1/me');
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const { data } = await res.json();
    expectKeys(data, ['kind', 'tier', 'key_prefix', 'label', 'limits', 'usage'], 'identity');
    assert.equal(data.kind, 'anonymous');
    assert.equal(data.tier, 'anonymous');
    assert.equal(data.key_prefix, null);
    assert.equal(data.label, null);
    assert.deepEqual(data.limits, { requests_per_minute: 10000, requests_per_day: 100000, concurrent_waits: 0 });
    expectKeys(data.usage, ['requests_this_minute', 'requests_today']);
    assert.ok(Number.isInteger(data.usage.requests_this_minute));
    assert.ok(Number.isInteger(data.usage.requests_today));
  });

  test('key identity via Bearer and via X-API-Key', async () => {
    const k = (await (await svc.api('/api/v1/keys', json({ label: 'me-test' }))).json()).data;
    for (const headers of [{ authorization: `Bearer ${k.api_key}` }, { 'x-api-key': k.api_key }] as Record<string, string>[]) {
      const res = await svc.api('/api/v1/me', { headers });
      assert.equal(res.status, 200);
      const { data } = await res.json();
      assert.equal(data.kind, 'key');
      assert.equal(data.tier, 'free');
      assert.equal(data.key_prefix, k.key_prefix);
      assert.equal(data.label, 'me-test');
      assert.deepEqual(data.limits, { requests_per_minute: 300, requests_per_day: 10000, concurrent_waits: 5 });
    }
  });
});

describe('POST /api/v1/inboxes', () => {
  test('no body: default domain, random local part of 10 [a-z0-9]', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await svc.api('/api/v1/inboxes', { method: 'POST' });
      assert.equal(res.status, 201);
      expectLimitHeaders(res);
      const body = await res.json();
      expectKeys(body, ['data']);
      expectKeys(body.data, ['address', 'local_part', 'domain', 'email_ttl_seconds'], 'inbox');
      assert.match(body.data.local_part, /^[a-z0-9]{10}$/);
      assert.equal(body.data.domain, DOMAINS[0]);
      assert.equal(body.data.address, `${body.data.local_part}@${DOMAINS[0]}`);
      assert.equal(body.data.email_ttl_seconds, 3600);
      seen.add(body.data.address);
    }
    assert.equal(seen.size, 5);
  });

  test('explicit domain and local_part (lowercased)', async () => {
    const res = await svc.api('/api/v1/inboxes', json({ domain: 'second.example', local_part: 'Alice.Smith+Tag' }));
    assert.equal(res.status, 201);
    const { data } = await res.json();
    assert.deepEqual(data, { address: 'alice.smith+tag@second.example', local_part: 'alice.smith+tag', domain: 'second.example', email_ttl_seconds: 3600 });
  });

  test('unknown domain → 400 invalid_request naming domain', async () => {
    await expectError(await svc.api('/api/v1/inboxes', json({ domain: 'gmail.com' })), 400, 'invalid_request', base(), /domain/);
  });

  test('bad local_part → 400 naming local_part', async () => {
    for (const lp of ['-starts-with-dash', 'has space', 'a'.repeat(65), '', 'ünïcode']) {
      await expectError(await svc.api('/api/v1/inboxes', json({ local_part: lp })), 400, 'invalid_request', base(), /local_part/);
    }
  });

  test('every address POST /inboxes hands out can receive mail and be listed', async () => {
    // the pattern alone allows "a..b" and "a.", which are not dot-atoms: SMTP could never deliver to them
    for (const lp of ['a..b', 'a.', 'x.-.y..z']) {
      await expectError(await svc.api('/api/v1/inboxes', json({ local_part: lp })), 400, 'invalid_request', base(), /local_part/);
    }
    for (const lp of ['a_b', 'a+b-c.d', 'x'.repeat(64), '0']) {
      const res = await svc.api('/api/v1/inboxes', json({ local_part: lp }));
      assert.equal(res.status, 201, lp);
      const { address } = (await res.json()).data;
      const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [address], body: message({ From: 'a@example.org', Subject: lp }, 'x') });
      assert.equal(r.rcpt[0].code, 250, `${address}: RCPT accepted`);
      assert.equal(r.data?.code, 250);
      assert.equal((await listAll(svc.api, address)).length, 1, `${address} is listed`);
    }
  });

  test('an address that holds mail → 409 address_in_use; after purge it is free again', async () => {
    const address = 'busy@ephemail.test';
    const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [address], body: message({ From: 'a@example.org', Subject: 'x' }, 'hi') });
    assert.equal(r.data?.code, 250);
    const e = await expectError(await svc.api('/api/v1/inboxes', json({ local_part: 'BUSY' })), 409, 'address_in_use', base());
    assert.match(e.message, /local_part|DELETE/);
    const purge = await svc.api(`/api/v1/inboxes/${address}/emails`, { method: 'DELETE' });
    assert.equal(purge.status, 200);
    assert.equal((await svc.api('/api/v1/inboxes', json({ local_part: 'busy' }))).status, 201);
  });
});

describe('emails', () => {
  let address: string;
  let id: string;
  before(async () => {
    address = (await (await svc.api('/api/v1/inboxes', { method: 'POST' })).json()).data.address;
    await svc.send({
      from: '"Zoë Sender" <zoe@sender.example>',
      to: address,
      cc: 'copy@elsewhere.example',
      subject: 'Héllo wörld',
      text: 'plain body',
      html: '<p>html body</p>',
      messageId: '<abc123@sender.example>',
      envelope: { from: 'bounce@Mail.Sender.Example', to: [address] },
      attachments: [{ filename: 'note.txt', content: 'attached text' }],
    });
    const list = await listAll(svc.api, address);
    assert.equal(list.length, 1);
    id = list[0].id;
  });

  test('list: summaries only, meta shape', async () => {
    const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address.toUpperCase())}/emails`);
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const body = await res.json();
    expectKeys(body, ['data', 'meta']);
    assert.equal(body.data.length, 1);
    const s = body.data[0];
    expectSummary(s);
    assert.equal(s.address, address);
    assert.equal(s.sender, 'Zoë Sender <zoe@sender.example>'); // nodemailer sends it as an encoded word without quotes
    assert.equal(s.mailed_by, 'mail.sender.example');
    assert.equal(s.subject, 'Héllo wörld');
    assert.equal(s.has_attachments, true);
    assert.ok(Math.abs(Date.parse(s.received_at) - Date.now()) < 30_000);
    expectKeys(body.meta, ['address', 'count', 'next_since', 'next_before', 'waited'], 'list meta');
    assert.deepEqual(body.meta, { address, count: 1, next_since: s.id, next_before: null, waited: false });
  });

  test('list of an empty inbox', async () => {
    const res = await svc.api('/api/v1/inboxes/nobody-here@second.example/emails');
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { data: [], meta: { address: 'nobody-here@second.example', count: 0, next_since: null, next_before: null, waited: false } });
  });

  test('GET /emails/{id}: full email with extras', async () => {
    const res = await svc.api(`/api/v1/emails/${id}`);
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const body = await res.json();
    expectKeys(body, ['data']);
    const e = body.data;
    expectFull(e);
    assert.equal(e.id, id);
    assert.equal(e.mailed_by, 'mail.sender.example');
    assert.equal(e.to, address);
    assert.equal(e.cc, 'copy@elsewhere.example');
    assert.equal(e.message_id, '<abc123@sender.example>');
    assert.equal(e.text_body.trim(), 'plain body');
    assert.equal(e.html_body.trim(), '<p>html body</p>');
    const names = e.headers.map((h: any) => h.name.toLowerCase());
    for (const h of ['from', 'to', 'cc', 'subject', 'message-id']) assert.ok(names.includes(h), `headers include ${h}`);
    assert.ok(names.indexOf('from') >= 0);
    assert.equal(e.attachments.length, 1);
    const a = e.attachments[0];
    assert.equal(a.filename, 'note.txt');
    assert.equal(a.content_type, 'text/plain');
    assert.equal(a.size_bytes, 'attached text'.length);
    assert.equal(a.download_url, `${base()}/api/v1/emails/${id}/attachments/${a.id}`);
  });

  test('id lookup is case-insensitive', async () => {
    assert.equal((await svc.api(`/api/v1/emails/${id.toUpperCase()}`)).status, 200);
  });

  test('GET /emails/{id}/attachments: data + meta', async () => {
    const res = await svc.api(`/api/v1/emails/${id}/attachments`);
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const body = await res.json();
    expectKeys(body, ['data', 'meta']);
    assert.deepEqual(body.meta, { email_id: id, count: 1 });
    const full = (await (await svc.api(`/api/v1/emails/${id}`)).json()).data;
    assert.deepEqual(body.data, full.attachments);
  });

  test('download: raw bytes', async () => {
    const full = (await (await svc.api(`/api/v1/emails/${id}`)).json()).data;
    const res = await fetch(full.attachments[0].download_url.replace(base(), svc.http));
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    assert.equal(await res.text(), 'attached text');
  });

  test('unknown email id / attachment id → 404 not_found', async () => {
    const missing = '019a0000-0000-7000-8000-000000000000';
    await expectError(await svc.api(`/api/v1/emails/${missing}`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/not-a-uuid`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${missing}/attachments`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${missing}/attachments/1`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${id}/attachments/999`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${missing}`, { method: 'DELETE' }), 404, 'not_found', base());
  });

  test('DELETE /emails/{id}: 204 without body, then 404 everywhere', async () => {
    const addr = (await (await svc.api('/api/v1/inboxes', { method: 'POST' })).json()).data.address;
    await svc.send({ to: addr, subject: 'gone soon', text: 'x', attachments: [{ filename: 'a.bin', content: Buffer.from([1, 2, 3]) }] });
    const [s] = await listAll(svc.api, addr);
    const res = await svc.api(`/api/v1/emails/${s.id}`, { method: 'DELETE' });
    assert.equal(res.status, 204);
    expectLimitHeaders(res);
    assert.equal(await res.text(), '');
    await expectError(await svc.api(`/api/v1/emails/${s.id}`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${s.id}/attachments`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${s.id}/attachments/1`), 404, 'not_found', base());
    await expectError(await svc.api(`/api/v1/emails/${s.id}`, { method: 'DELETE' }), 404, 'not_found', base());
    assert.deepEqual(await listAll(svc.api, addr), []);
  });

  test('DELETE inbox emails: {address, deleted}, idempotent with 0', async () => {
    const addr = (await (await svc.api('/api/v1/inboxes', { method: 'POST' })).json()).data.address;
    for (let i = 0; i < 3; i++) await svc.send({ to: addr, subject: `m${i}`, text: 'x' });
    const ids = (await listAll(svc.api, addr)).map((e) => e.id);
    const noAtt = await svc.api(`/api/v1/emails/${ids[0]}/attachments`);
    assert.deepEqual(await noAtt.json(), { data: [], meta: { email_id: ids[0], count: 0 } });
    const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(addr.toUpperCase())}/emails`, { method: 'DELETE' });
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    assert.deepEqual(await res.json(), { data: { address: addr, deleted: 3 } });
    assert.deepEqual(await listAll(svc.api, addr), []);
    for (const id of ids) await expectError(await svc.api(`/api/v1/emails/${id}`), 404, 'not_found', base());
    const again = await svc.api(`/api/v1/inboxes/${addr}/emails`, { method: 'DELETE' });
    assert.deepEqual(await again.json(), { data: { address: addr, deleted: 0 } });
  });

  test('addresses in paths: malformed → 400, unknown domain → 404', async () => {
    for (const m of ['GET', 'DELETE']) {
      await expectError(await svc.api('/api/v1/inboxes/not-an-address/emails', { method: m }), 400, 'invalid_request', base(), /address/);
      await expectError(await svc.api('/api/v1/inboxes/a%40b%40ephemail.test/emails', { method: m }), 400, 'invalid_request', base());
      await expectError(await svc.api('/api/v1/inboxes/someone%40gmail.com/emails', { method: m }), 404, 'not_found', base(), /gmail\.com/);
    }
  });

  test('CORS open for the API', async () => {
    const res = await svc.api('/api/v1/domains', { headers: { origin: 'https://app.example' } });
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    const pre = await svc.api('/api/v1/keys', { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key' } });
    assert.ok(pre.status === 204 || pre.status === 200);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(pre.headers.get('access-control-allow-headers') ?? '', /x-api-key/i);
    assert.match(pre.headers.get('access-control-allow-headers') ?? '', /authorization/i);
    const exposed = (res.headers.get('access-control-expose-headers') ?? '').toLowerCase();
    for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']) assert.ok(exposed.includes(h), `${h} exposed to browsers`);
  });
});
