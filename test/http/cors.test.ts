// CORS, exactly (src/http/plugins/cors.ts, which replaced @fastify/cors with the same headers): any
// origin on every response (success, error, 404, outside /api), the rate-limit headers exposed, and
// every OPTIONS answered as a preflight before the key check and the quota (204, no body, no
// ratelimit-* headers), with or without Origin and Access-Control-Request-Method.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { midMinuteClock } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  // the service's clock stays in the middle of a minute: "nothing was counted" compares two readings
  // of one minute window, which a real minute boundary between them would reset
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' }, { clock: midMinuteClock() });
});
after(() => svc.stop());

const EXPOSE = 'ratelimit-limit, ratelimit-remaining, ratelimit-reset, retry-after, Mcp-Session-Id, Content-Disposition';
const PREFLIGHT: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': EXPOSE,
  'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
  'access-control-allow-headers': 'Authorization, X-API-Key, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID',
  'access-control-max-age': '86400',
  'content-length': '0',
};

test('every response carries Allow-Origin * and the exposed headers, and no Vary', async () => {
  for (const [path, init] of [
    ['/api/v1/domains', {}],
    ['/api/v1/domains', { headers: { origin: 'https://app.example' } }],
    ['/api/v1/me', { headers: { authorization: 'Bearer eph_nope' } }],
    ['/api/v1/nothing-here', {}],
    ['/api/v1/inboxes/x@ephemail.test/emails?limit=0', {}],
    ['/nothing-here', {}],
  ] as [string, RequestInit][]) {
    const res = await svc.api(path, init);
    await res.arrayBuffer();
    assert.equal(res.headers.get('access-control-allow-origin'), '*', path);
    assert.equal(res.headers.get('access-control-expose-headers'), EXPOSE, path);
    assert.equal(res.headers.get('access-control-allow-methods'), null, `${path}: preflight headers only on OPTIONS`);
    assert.equal(res.headers.get('vary'), null, path);
  }
});

test('OPTIONS is a preflight everywhere: 204, fixed headers, no body, no quota, no key check', async () => {
  const remaining = async () => Number((await svc.api('/api/v1/me')).headers.get('ratelimit-remaining'));
  const before = await remaining();
  for (const [path, headers] of [
    ['/api/v1/keys', { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key' }],
    ['/api/v1/keys', {}], // not strict: no Origin, no Access-Control-Request-Method
    ['/api/v1/me', { authorization: 'Bearer not-a-key' }],
    ['/api/v1/inboxes/x@ephemail.test/emails', { origin: 'https://app.example', 'access-control-request-method': 'DELETE' }],
    ['/mcp', { origin: 'https://agent.example', 'access-control-request-method': 'POST' }],
    ['/no/such/path', {}],
  ] as [string, Record<string, string>][]) {
    for (let i = 0; i < 2; i++) {
      const res = await svc.api(path, { method: 'OPTIONS', headers });
      assert.equal(res.status, 204, path);
      assert.equal(await res.text(), '', path);
      for (const [name, value] of Object.entries(PREFLIGHT)) assert.equal(res.headers.get(name), value, `${path} ${name}`);
      for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'vary', 'content-type']) assert.equal(res.headers.get(name), null, `${path} has no ${name}`);
    }
  }
  assert.equal(await remaining(), before, 'no preflight was counted');
});
