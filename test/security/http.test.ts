// Hostile HTTP: malformed requests get the contract's envelope (never a 500 or a
// framework page), links never come from a spoofed Host, client IPs are bucketed as documented,
// rate-limit counters are atomic, and invalid keys never fall back to anonymous.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ipBucket } from '../../src/domain/limits.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { midMinuteClock } from '../helpers/time.ts';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One HTTP/1.1 request written byte for byte (fetch would normalise the path first). */
function rawHttp(base: string, head: string, body = ''): Promise<RawResponse> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port) });
    let data = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => (data += d));
    s.on('error', reject);
    s.on('close', () => {
      const [h, ...rest] = data.split('\r\n\r\n');
      const lines = h.split('\r\n');
      const status = Number(lines[0].split(' ')[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      let b = rest.join('\r\n\r\n');
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        let out = '';
        for (let pos = 0; ;) {
          const nl = b.indexOf('\r\n', pos);
          const n = Number.parseInt(b.slice(pos, nl), 16);
          if (!n) break;
          out += b.slice(nl + 2, nl + 2 + n);
          pos = nl + 2 + n + 2;
        }
        b = out;
      }
      resolve({ status, headers, body: Buffer.from(b, 'latin1').toString('utf8') });
    });
    s.write(`${head.replace(/\n/g, '\r\n')}\r\nHost: ${u.host}\r\nConnection: close\r\n${body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`);
  });
}

/** The contract's envelope, with one of the allowed statuses; never a 500 or a framework body. */
function expectEnvelope(r: { status: number; headers: Record<string, string>; body: string }, allowed: Record<number, string>, what: string): { type: string; message: string; docs: string } {
  assert.ok(r.status in allowed, `${what}: status ${r.status}, body ${r.body.slice(0, 300)}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/, `${what}: content-type`);
  const body = JSON.parse(r.body);
  assert.deepEqual(Object.keys(body), ['error'], `${what}: ${r.body}`);
  assert.deepEqual(Object.keys(body.error).sort(), ['docs', 'message', 'type']);
  assert.equal(body.error.type, allowed[r.status], `${what}: ${r.body}`);
  assert.doesNotMatch(r.body, /FST_|"statusCode"|"stack"|\bat .+\.(?:js|ts):\d+/, `${what}: framework details leak`);
  return body.error;
}

const headersOf = (res: Response) => Object.fromEntries(res.headers.entries());
const BAD = { 400: 'invalid_request', 404: 'not_found' };

describe('malformed HTTP requests get the envelope', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_PUBLIC_URL: 'https://mail.example.net', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' }, { mounts: [] });
  });
  after(async () => svc.stop());

  const bodies: [string, string, string][] = [
    ['malformed JSON', 'application/json', '{"local_part": "abc",'],
    ['JSON that is not an object', 'application/json', '"just a string"'],
    ['JSON array', 'application/json', '[1,2,3]'],
    ['JSON with a NUL', 'application/json', '{"local_part":"a\u0000b"}'],
    ['deeply nested JSON', 'application/json', '['.repeat(5000) + ']'.repeat(5000)],
    ['wrong content type', 'text/plain', '{"local_part":"abc"}'],
    ['form content type', 'application/x-www-form-urlencoded', 'local_part=abc'],
    ['multipart content type', 'multipart/form-data; boundary=x', '--x\r\n\r\nabc\r\n--x--'],
    ['XML', 'application/xml', '<a/>'],
    ['bad charset', 'application/json; charset=utf-7', '{}'],
    ['prototype pollution', 'application/json', '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}'],
  ];
  for (const [what, type, body] of bodies) {
    test(`POST /inboxes with ${what} → 400 invalid_request`, async () => {
      const r = await rawHttp(svc.http, `POST /api/v1/inboxes HTTP/1.1\nContent-Type: ${type}`, body);
      if (what === 'bad charset' && r.status === 201) return; // a charset parameter on JSON is harmless
      expectEnvelope(r, { 400: 'invalid_request' }, what);
    });
  }

  test('an oversized body (1 MiB) → 400 invalid_request, also when Content-Length lies', async () => {
    const big = JSON.stringify({ label: 'x'.repeat(1024 * 1024) });
    const res = await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
    expectEnvelope({ status: res.status, headers: headersOf(res), body: await res.text() }, { 400: 'invalid_request' }, 'oversized');
    const lie = await rawHttp(svc.http, 'POST /api/v1/inboxes HTTP/1.1\nContent-Type: application/json\nContent-Length: 5', '{"local_part":"abc"}');
    assert.ok(lie.status === 400 || lie.status === 201, `lying Content-Length: ${lie.status}`);
    assert.ok((await (async () => Object.getPrototypeOf({}).admin)()) === undefined, 'no prototype pollution');
  });

  const paths: [string, Record<number, string>][] = [
    ['/api/v1/inboxes/%E0%A4%A/emails', BAD],
    ['/api/v1/inboxes/%/emails', BAD],
    ['/api/v1/inboxes/%zz@ephemail.test/emails', BAD],
    ['/api/v1/emails/%ff%fe', BAD],
    ['/api/v1/inboxes/%C0%AE%C0%AE/emails', BAD],
    ['/api/v1//domains', { 404: 'not_found' }],
    ['//api/v1/domains', { 404: 'not_found' }],
    ['/api/v1/inboxes//emails', { 404: 'not_found' }],
    ['/api/v1/domains/', { 404: 'not_found' }],
    ['/api/v1/%2e%2e/v1/domains', { 404: 'not_found' }],
    ['/api/v1/inboxes/%2e%2e/emails', BAD],
    ['/api/v1/inboxes/%2e%2e%2f%2e%2e%2fetc%2fpasswd/emails', BAD],
    ['/api/v1/emails/%2e%2e/attachments', BAD],
    ['/api/v1/emails/..%2f..%2f/attachments/x', BAD],
    ['/api/v1/inboxes/..%5c..%5cwin.ini/emails', BAD],
    ['/api/v1/inboxes/a%00b@ephemail.test/emails', BAD],
    ['/api/v1/inboxes/a%0d%0aSet-Cookie:x@ephemail.test/emails', BAD],
    ['/api/v1/inboxes/%EF%BC%A0ephemail.test/emails', BAD],
    ['/api/v1/inboxes/a%E2%80%8Bb@ephemail.test/emails', BAD],
    ['/api/v1/inboxes/user@ex%C3%A4mple.test/emails', BAD],
    ['/api/v1/inboxes/user@unknown.example/emails', BAD],
    ['/api/v1/emails/not-a-uuid', BAD],
    ['/api/v1/nope', { 404: 'not_found' }],
    ['/api/v2/domains', { 404: 'not_found' }],
    ['/api/v1/inboxes/a@ephemail.test/emails?limit=abc', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?limit=1e309', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?limit=-1', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?since=%ZZ', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?since=a&since=b', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?wait=-1e309', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?limit=Infinity', BAD],
    ['/api/v1/inboxes/a@ephemail.test/emails?since[]=1&since[]=2', { 200: '', ...BAD }],
    ['/api/v1/inboxes/a@ephemail.test/emails?__proto__[x]=1', { 200: '', ...BAD }],
  ];
  for (const [path, allowed] of paths) {
    test(`GET ${path.slice(0, 70)} → ${Object.keys(allowed).join('/')} envelope`, async () => {
      const r = await rawHttp(svc.http, `GET ${path} HTTP/1.1`);
      if (r.status === 200 && 200 in allowed) return;
      const e = expectEnvelope(r, allowed, path);
      if (path.includes('//') || path.endsWith('/')) assert.match(e.message, /empty segment/);
    });
  }

  test('fuzzed paths, queries and headers (fast-check): never a 500, every error is the envelope', async () => {
    const seg = fc.oneof(
      fc.constantFrom('api', 'v1', 'inboxes', 'emails', 'attachments', 'keys', 'me', 'domains', 'health', 'openapi.json', '..', '.', '%2e%2e', '%2f', '%00', '%', '%zz', '%C0%AE', '%E2%80%AE', 'a@ephemail.test', 'a@x', '@', '019a0000-0000-7000-8000-000000000000', ''),
      fc.string({ maxLength: 12 }).map(encodeURIComponent),
    );
    const path = fc.tuple(fc.constantFrom('/api/v1/', '/api/v1/inboxes/', '/api/v1/emails/', '/'), fc.array(seg, { maxLength: 5 })).map(([p, xs]) => p + xs.join('/'));
    const query = fc.array(fc.tuple(fc.constantFrom('limit', 'since', 'before', 'wait', 'x', '__proto__', 'limit[]'), fc.oneof(fc.constantFrom('1e309', '-1', '0', '100', '101', 'NaN', '', '%', '019a0000-0000-7000-8000-000000000000'), fc.string({ maxLength: 8 }).map(encodeURIComponent))), { maxLength: 3 })
      .map((kv) => (kv.length ? `?${kv.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));
    const method = fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD');
    const headers = fc.record({ 'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1', 'multipart/form-data'), 'x-api-key': fc.constantFrom(undefined, '', 'eph_x', 'eph_' + 'A'.repeat(40)) }, { requiredKeys: [] });
    const body = fc.oneof(fc.constant(undefined), fc.json({ maxDepth: 3 }), fc.string({ maxLength: 40 }));
    await fc.assert(fc.asyncProperty(method, path, query, headers, body, async (m, p, q, h, b) => {
      const clean = Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as Record<string, string>;
      const r = await rawHttp(svc.http, `${m} ${p}${q} HTTP/1.1${Object.entries(clean).map(([k, v]) => `\n${k}: ${v}`).join('')}`, m === 'GET' || m === 'HEAD' || b === undefined ? '' : b);
      assert.ok(r.status > 0 && r.status < 500, `${m} ${p}${q}: ${r.status} ${r.body.slice(0, 200)}`);
      if (r.status >= 400 && m !== 'HEAD') {
        const e = JSON.parse(r.body);
        assert.deepEqual(Object.keys(e), ['error'], `${m} ${p}${q}: ${r.body.slice(0, 200)}`);
      }
    }), { numRuns: Number(process.env.EPHEMAIL_FC_RUNS ?? 400), seed: Number(process.env.EPHEMAIL_FC_SEED ?? 60) });
  });

  test('unicode addresses: a Unicode local part is named (200); unicode or unknown domains are not', async () => {
    const ok = await rawHttp(svc.http, `GET /api/v1/inboxes/${encodeURIComponent('üser@ephemail.test')}/emails HTTP/1.1`);
    assert.equal(ok.status, 200, ok.body);
    assert.equal(JSON.parse(ok.body).meta.address, 'üser@ephemail.test');
    const nfd = await rawHttp(svc.http, `GET /api/v1/inboxes/${encodeURIComponent('u\u0308ser@ephemail.test')}/emails HTTP/1.1`);
    assert.equal(JSON.parse(nfd.body).meta.address, 'üser@ephemail.test', 'NFC-normalised: one inbox, not two');
    const raw8 = await rawHttp(svc.http, `GET /api/v1/inboxes/${Buffer.from('üser@ephemail.test').toString('latin1')}/emails HTTP/1.1`);
    assert.ok(raw8.status === 200 || raw8.status === 400, `raw UTF-8 in the path: ${raw8.status}`);
    if (raw8.status !== 200) expectEnvelope(raw8, BAD, 'raw utf-8');
  });

  test('a very long query string (over 8 KiB) → 400 invalid_request envelope', async () => {
    const r = await rawHttp(svc.http, `GET /api/v1/domains?x=${'a'.repeat(10_000)} HTTP/1.1`);
    expectEnvelope(r, { 400: 'invalid_request' }, 'long query');
  });

  test('a request line over the server header limit (64 KiB) → 400 invalid_request envelope, not a bare 431', async () => {
    const r = await rawHttp(svc.http, `GET /api/v1/domains?x=${'a'.repeat(64 * 1024)} HTTP/1.1`);
    expectEnvelope(r, { 400: 'invalid_request' }, 'huge query');
    const h = await rawHttp(svc.http, `GET /api/v1/domains HTTP/1.1\nX-Big: ${'b'.repeat(64 * 1024)}`);
    expectEnvelope(h, { 400: 'invalid_request' }, 'huge header');
  });

  test('a malformed request line or header gets a 400, never a 500', async () => {
    for (const head of ['GET /api/v1/domains HTTP/9.9', 'GET /api/v1/domains HTTP/1.1\nBad Header Name: x', 'GET\t/api/v1/domains HTTP/1.1']) {
      const r = await rawHttp(svc.http, head);
      assert.ok(r.status === 400 || r.status === 505 || r.status === 404, `${JSON.stringify(head)}: ${r.status}`);
    }
  });

  test('links come from EPHEMAIL_PUBLIC_URL, never from Host or X-Forwarded-Host', async () => {
    await svc.send({ to: 'links@ephemail.test', subject: 'links', text: 'x', attachments: [{ filename: 'a.txt', content: 'a' }] });
    const list = await (await svc.api('/api/v1/inboxes/links@ephemail.test/emails')).json();
    const id = list.data[0].id;
    const spoof = { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http', forwarded: 'host=evil.example;proto=http' };
    const app = svc.service.app;
    const email = await app.inject({ method: 'GET', url: `/api/v1/emails/${id}`, headers: spoof });
    assert.equal(email.statusCode, 200);
    assert.doesNotMatch(email.body, /evil\.example/);
    assert.ok(email.json().data.attachments[0].download_url.startsWith('https://mail.example.net/api/v1/emails/'));
    const err = await app.inject({ method: 'GET', url: '/api/v1/emails/nope', headers: spoof });
    assert.equal(err.json().error.docs, 'https://mail.example.net/docs#error-not_found');
    const index = await app.inject({ method: 'GET', url: '/api/v1', headers: spoof });
    assert.doesNotMatch(index.body, /evil\.example/);
    const inbox = await app.inject({ method: 'POST', url: '/api/v1/inboxes', headers: spoof });
    assert.doesNotMatch(inbox.body, /evil\.example/);
  });

  test('without EPHEMAIL_PUBLIC_URL links use the bound port on localhost, still never the Host header', async () => {
    const other = await startService({}, { mounts: [] });
    try {
      const port = new URL(other.http).port;
      const r = await other.service.app.inject({ method: 'GET', url: '/api/v1/emails/nope', headers: { host: 'evil.example:666' } });
      assert.equal(r.json().error.docs, `http://localhost:${port}/docs#error-not_found`);
    } finally {
      await other.stop();
    }
  });
});

describe('client IP and rate limits', () => {
  test('ipBucket: IPv4 as is, IPv4-mapped as IPv4, IPv6 by /64 in every spelling', () => {
    const table: [string, string][] = [
      ['203.0.113.9', 'ip:203.0.113.9'],
      ['::ffff:203.0.113.9', 'ip:203.0.113.9'],
      ['::FFFF:203.0.113.9', 'ip:203.0.113.9'],
      ['2001:db8:1:2::1', 'ip6:2001:db8:1:2::/64'],
      ['2001:db8:1:2:ffff:ffff:ffff:ffff', 'ip6:2001:db8:1:2::/64'],
      ['2001:0db8:0001:0002:0000:0000:0000:0001', 'ip6:2001:db8:1:2::/64'],
      ['2001:DB8:1:2::abcd', 'ip6:2001:db8:1:2::/64'],
      ['2001:db8:1:2::1%eth0', 'ip6:2001:db8:1:2::/64'],
      ['2001:db8::1', 'ip6:2001:db8:0:0::/64'],
      ['2001:db8:0:0:1::1', 'ip6:2001:db8:0:0::/64'],
      ['::1', 'ip6:0:0:0:0::/64'],
      ['::', 'ip6:0:0:0:0::/64'],
      ['64:ff9b::203.0.113.9', 'ip6:64:ff9b:0:0::/64'],
    ];
    for (const [ip, bucket] of table) assert.equal(ipBucket(ip), bucket, ip);
    assert.notEqual(ipBucket('2001:db8:1:2::1'), ipBucket('2001:db8:1:3::1'));
  });

  test('X-Forwarded-For is ignored unless EPHEMAIL_TRUST_PROXY; IPv6 clients share their /64', async () => {
    const svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '5' }, { mounts: [], clock: midMinuteClock() });
    try {
      const app = svc.service.app;
      const get = (remoteAddress: string, xff?: string) =>
        app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress, headers: xff ? { 'x-forwarded-for': xff } : {} });
      const codes: number[] = [];
      for (let i = 0; i < 7; i++) codes.push((await get('198.51.100.7', `10.0.0.${i}, 192.0.2.${i}`)).statusCode);
      assert.deepEqual(codes, [200, 200, 200, 200, 200, 429, 429], 'rotating X-Forwarded-For buys nothing');
      const v6: number[] = [];
      for (let i = 0; i < 7; i++) v6.push((await get(`2001:db8:aa:bb:${i}::${i + 1}`)).statusCode);
      assert.deepEqual(v6, [200, 200, 200, 200, 200, 429, 429], 'one /64 is one client');
      assert.equal((await get('2001:db8:aa:bc::1')).statusCode, 200, 'the next /64 is another client');
    } finally {
      await svc.stop();
    }
    const proxied = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '5', EPHEMAIL_TRUST_PROXY: 'true' }, { mounts: [], clock: midMinuteClock() });
    try {
      const app = proxied.service.app;
      const codes: number[] = [];
      for (let i = 0; i < 7; i++) codes.push((await app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress: '10.1.1.1', headers: { 'x-forwarded-for': `192.0.2.${i}` } })).statusCode);
      assert.deepEqual(codes, Array(7).fill(200), 'behind a trusted proxy each forwarded client has its own bucket');
      // the proxy appends the address it saw; what the client wrote in front of it changes nothing
      const spoofed: number[] = [];
      for (let i = 0; i < 7; i++) spoofed.push((await app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress: '10.1.1.1', headers: { 'x-forwarded-for': `203.0.113.${i}, 198.51.100.200` } })).statusCode);
      assert.deepEqual(spoofed, [200, 200, 200, 200, 200, 429, 429], 'a client-supplied X-Forwarded-For entry does not pick the bucket');
    } finally {
      await proxied.stop();
    }
  });

  test('200 parallel anonymous requests → exactly 60 succeed, the rest get 429 rate_limited', async () => {
    const svc = await startService({}, { mounts: [], clock: midMinuteClock() });
    try {
      const res = await Promise.all(Array.from({ length: 200 }, () => fetch(`${svc.http}/api/v1/domains`).then(async (r) => ({ status: r.status, body: await r.text(), h: headersOf(r) }))));
      assert.equal(res.filter((r) => r.status === 200).length, 60);
      const limited = res.filter((r) => r.status !== 200);
      assert.equal(limited.length, 140);
      for (const r of limited) expectEnvelope({ status: r.status, headers: r.h, body: r.body }, { 429: 'rate_limited' }, '429');
      const remaining = res.filter((r) => r.status === 200).map((r) => Number(r.h['ratelimit-remaining'])).sort((a, b) => a - b);
      assert.deepEqual(remaining, Array.from({ length: 60 }, (_, i) => i), 'each success saw its own count');
    } finally {
      await svc.stop();
    }
  });
});

describe('API keys', () => {
  let svc: TestService;
  let key: string;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '20' }, { mounts: [], clock: midMinuteClock() });
    const r = await svc.service.app.inject({ method: 'POST', url: '/api/v1/keys', remoteAddress: '192.0.2.50', payload: { label: 'sec' } });
    assert.equal(r.statusCode, 201, r.body);
    key = r.json().data.api_key;
  });
  after(async () => svc.stop());

  test('invalid keys never fall back to anonymous: 401 unauthorized on every route and in every spelling', async () => {
    const app = svc.service.app;
    const variants: Record<string, string>[] = [
      { authorization: 'Bearer eph_0000000000000000000000000000000000000000' },
      { authorization: `Bearer ${key}x` },
      { authorization: `Bearer ${key.slice(0, -1)}` },
      { authorization: `Bearer ${key.toUpperCase()}` },
      { authorization: 'Bearer' },
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}` },
      { authorization: key },
      { authorization: `Bearer ${key} extra` },
      { 'x-api-key': '' },
      { 'x-api-key': 'not-a-key' },
      { 'x-api-key': `${key}\u0000` },
      { authorization: `Bearer ${key}`, 'x-api-key': 'eph_0000000000000000000000000000000000000000' },
    ];
    for (const [i, headers] of variants.entries()) {
      for (const url of ['/api/v1/domains', '/api/v1/me', '/api/v1/inboxes/a@ephemail.test/emails']) {
        const r = await app.inject({ method: 'GET', url, headers, remoteAddress: `192.0.2.${100 + i}` });
        expectEnvelope({ status: r.statusCode, headers: r.headers as Record<string, string>, body: r.body }, { 401: 'unauthorized' }, `${JSON.stringify(headers)} ${url}`);
        assert.ok(!r.body.includes(key), 'the key is never echoed');
      }
    }
    const good = await app.inject({ method: 'GET', url: '/api/v1/me', headers: { 'x-api-key': key }, remoteAddress: '192.0.2.99' });
    assert.equal(good.json().data.kind, 'key');
  });

  test('failed key attempts count against the IP', async () => {
    const app = svc.service.app;
    const ip = '198.51.100.77';
    for (let i = 0; i < 20; i++) {
      const r = await app.inject({ method: 'GET', url: '/api/v1/domains', headers: { authorization: `Bearer eph_${String(i).padStart(40, '0')}` }, remoteAddress: ip });
      assert.equal(r.statusCode, 401);
      assert.equal(r.headers['ratelimit-remaining'], String(19 - i));
    }
    const anon = await app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress: ip });
    assert.equal(anon.statusCode, 429, 'guessing keys used up the anonymous quota of the IP');
    const otherIp = await app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress: '198.51.100.78' });
    assert.equal(otherIp.statusCode, 200);
  });
});
