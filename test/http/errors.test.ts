// The error envelope everywhere (spec: Errors): unmatched paths, invalid_request naming the field,
// never a framework-default body or a stack trace.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { expectError, expectLimitHeaders } from '../helpers/contract.ts';

let svc: TestService;
let base: string;
let key: string;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000', EPHEMAIL_LIMIT_ANON_PER_DAY: '100000', EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '100', EPHEMAIL_PUBLIC_URL: 'https://mail.example.com/' });
  base = 'https://mail.example.com';
  key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
});
after(() => svc.stop());

const post = (path: string, body: string, contentType = 'application/json') => svc.api(path, { method: 'POST', headers: { 'content-type': contentType }, body });
const list = (q: string, headers: Record<string, string> = {}) => svc.api(`/api/v1/inboxes/someone%40ephemail.test/emails?${q}`, { headers });

/** Raw HTTP so the path is sent exactly as written (fetch normalises some paths). */
function raw(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Response> {
  const u = new URL(svc.http);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : String(v));
        resolve(new Response(chunks.length ? Buffer.concat(chunks) : null, { status: res.statusCode, headers: h }));
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('unmatched paths', () => {
  test('404 not_found naming method and path', async () => {
    for (const [method, path] of [['GET', '/api/v1/nope'], ['POST', '/api/v1/emails'], ['PUT', '/api/v1/domains'], ['GET', '/api/v2/domains'], ['PATCH', '/api/v1/emails/x'], ['GET', '/api/v1/inboxes/a@ephemail.test']]) {
      const res = await raw(method, path);
      const e = await expectError(res, 404, 'not_found', base);
      assert.ok(e.message.includes(method), `${e.message} names ${method}`);
      assert.ok(e.message.includes(path), `${e.message} names ${path}`);
    }
  });

  test('empty segment (doubled slash) is called out', async () => {
    for (const path of ['/api/v1//domains', '/api/v1/inboxes//emails', '/api/v1/emails//attachments', '//api/v1/health', '/api/v1/domains/']) {
      const res = await raw('GET', path);
      const e = await expectError(res, 404, 'not_found', base);
      assert.match(e.message, /empty segment/i, path);
      assert.ok(e.message.includes(path), `${e.message} names ${path}`);
    }
  });

  test('unmatched path still carries ratelimit headers', async () => {
    expectLimitHeaders(await raw('GET', '/api/v1/nope'));
  });

  test('bad percent-encoding is an envelope, not a framework body', async () => {
    const res = await raw('GET', '/api/v1/inboxes/%E0%A4%A/emails');
    assert.ok(res.status === 400 || res.status === 404, String(res.status));
    expectLimitHeaders(res);
    await expectError(res, res.status, res.status === 400 ? 'invalid_request' : 'not_found', base);
  });

  test('an over-long path segment is a short envelope with the limit headers', async () => {
    for (const path of [`/api/v1/emails/${'a'.repeat(2000)}`, `/api/v1/inboxes/${'a'.repeat(1200)}%40ephemail.test/emails`]) {
      const res = await raw('GET', path);
      expectLimitHeaders(res);
      const e = await expectError(res, 400, 'invalid_request', base, /too long/);
      assert.ok(e.message.length < 300, 'the message does not echo the whole path');
    }
  });

  test('OPTIONS without Origin is not a framework plain-text error', async () => {
    const res = await raw('OPTIONS', '/api/v1/domains');
    assert.ok(res.status === 204 || res.status === 200, String(res.status));
    assert.equal(await res.text(), '');
  });
});

describe('invalid_request names the field', () => {
  test('limit bounds', async () => {
    await expectError(await list('limit=0'), 400, 'invalid_request', base, /limit/);
    await expectError(await list('limit=101'), 400, 'invalid_request', base, /limit/);
    await expectError(await list('limit=abc'), 400, 'invalid_request', base, /limit/);
    await expectError(await list('limit=2.5'), 400, 'invalid_request', base, /limit/);
    await expectError(await list('limit=-1'), 400, 'invalid_request', base, /limit/);
    assert.equal((await list('limit=1')).status, 200);
    assert.equal((await list('limit=100')).status, 200);
  });

  test('wait bounds (with a key, so the bound is what fails)', async () => {
    await expectError(await list('wait=31', { authorization: `Bearer ${key}` }), 400, 'invalid_request', base, /wait/);
    await expectError(await list('wait=-1', { authorization: `Bearer ${key}` }), 400, 'invalid_request', base, /wait/);
    await expectError(await list('wait=soon', { authorization: `Bearer ${key}` }), 400, 'invalid_request', base, /wait/);
    await expectError(await list('wait=31'), 400, 'invalid_request', base, /wait/);
  });

  test('malformed since/before; both at once', async () => {
    await expectError(await list('since=yesterday'), 400, 'invalid_request', base, /since/);
    await expectError(await list('before=123'), 400, 'invalid_request', base, /before/);
    await expectError(await list('since='), 400, 'invalid_request', base, /since/);
    const id = '019a0000-0000-7000-8000-000000000000';
    await expectError(await list(`since=${id}&before=${id}`), 400, 'invalid_request', base, /since.*before|before.*since/);
    assert.equal((await list(`since=${id}`)).status, 200);
    assert.equal((await list(`before=${id.toUpperCase()}`)).status, 200);
  });

  test('repeated query parameter is rejected, not silently picked', async () => {
    await expectError(await list('limit=5&limit=6'), 400, 'invalid_request', base, /limit/);
  });

  test('malformed JSON body', async () => {
    await expectError(await post('/api/v1/keys', '{"label":'), 400, 'invalid_request', base, /JSON/);
    await expectError(await post('/api/v1/inboxes', '{bad json}'), 400, 'invalid_request', base, /JSON/);
  });

  test('body that is JSON but not an object', async () => {
    await expectError(await post('/api/v1/keys', '[]'), 400, 'invalid_request', base, /body/);
    await expectError(await post('/api/v1/inboxes', '"x"'), 400, 'invalid_request', base, /body/);
    await expectError(await post('/api/v1/inboxes', 'null'), 400, 'invalid_request', base, /body/);
  });

  test('application/json with parameters (charset) is JSON', async () => {
    for (const ct of ['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON', 'application/vnd.api+json']) {
      const res = await post('/api/v1/inboxes', JSON.stringify({ local_part: 'ct-test' }), ct);
      assert.equal(res.status, 201, `${ct}: ${await res.text()}`);
    }
    const res = await post('/api/v1/keys', JSON.stringify({ label: 'charset' }), 'application/json; charset=utf-8');
    assert.equal(res.status, 201);
    assert.equal((await res.json()).data.label, 'charset');
  });

  test('wrong content type', async () => {
    await expectError(await post('/api/v1/keys', 'label=x', 'application/x-www-form-urlencoded'), 400, 'invalid_request', base, /Content-Type|JSON/i);
    await expectError(await post('/api/v1/inboxes', '{"domain":"ephemail.test"}', 'text/plain'), 400, 'invalid_request', base, /Content-Type|JSON/i);
  });

  test('body over 64 KiB', async () => {
    const big = JSON.stringify({ label: 'x'.repeat(70 * 1024) });
    await expectError(await post('/api/v1/keys', big), 400, 'invalid_request', base, /64 KiB|large/i);
    await expectError(await post('/api/v1/inboxes', big), 400, 'invalid_request', base, /64 KiB|large/i);
  });

  test('label over 100, contact_email over 254, wrong types, unknown fields', async () => {
    await expectError(await post('/api/v1/keys', JSON.stringify({ label: 'x'.repeat(101) })), 400, 'invalid_request', base, /label/);
    assert.equal((await post('/api/v1/keys', JSON.stringify({ label: 'x'.repeat(100) }))).status, 201);
    // lengths count characters, not UTF-16 units: 100 emoji fit, 101 do not
    const emoji = await post('/api/v1/keys', JSON.stringify({ label: '😀'.repeat(100) }));
    assert.equal(emoji.status, 201, await emoji.clone().text());
    assert.equal((await emoji.json()).data.label, '😀'.repeat(100));
    await expectError(await post('/api/v1/keys', JSON.stringify({ label: '😀'.repeat(101) })), 400, 'invalid_request', base, /label/);
    await expectError(await post('/api/v1/keys', JSON.stringify({ contact_email: `${'a'.repeat(250)}@x.io` })), 400, 'invalid_request', base, /contact_email/);
    await expectError(await post('/api/v1/keys', JSON.stringify({ label: 5 })), 400, 'invalid_request', base, /label/);
    await expectError(await post('/api/v1/keys', JSON.stringify({ lable: 'typo' })), 400, 'invalid_request', base, /lable/);
    await expectError(await post('/api/v1/inboxes', JSON.stringify({ domain: 'ephemail.test', name: 'x' })), 400, 'invalid_request', base, /name/);
    await expectError(await post('/api/v1/inboxes', JSON.stringify({ local_part: 42 })), 400, 'invalid_request', base, /local_part/);
  });

  test('invalid key gives unauthorized in the envelope, with headers', async () => {
    const res = await svc.api('/api/v1/domains', { headers: { 'x-api-key': 'eph_nope' } });
    expectLimitHeaders(res);
    await expectError(res, 401, 'unauthorized', base);
  });

  test('docs links use the public base URL', async () => {
    const e = await expectError(await svc.api('/api/v1/emails/x'), 404, 'not_found', base);
    assert.equal(e.docs, 'https://mail.example.com/docs#error-not_found');
  });
});
