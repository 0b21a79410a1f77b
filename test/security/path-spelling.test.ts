// Limits cannot be skipped by spelling the path differently (docs/security.md): every spelling that
// reaches an API route pays like /api/v1/… and gets its ratelimit-* headers; the others are a 404
// envelope. Never a 500, never an unmetered answer. Raw requests: no client normalises the path.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' });
});
after(() => svc.stop());

function raw(path: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const u = new URL(svc.http);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const SPELLINGS = [
  '/api/v1/domains', '/%61pi/v1/domains', '/%61%70%69/v1/domains', '/api/%76%31/domains', '/api/v1/%64omains',
  '/API/v1/domains', '/Api/V1/Domains', '/api/v1/./domains', '/api/v1/../v1/domains', '/x/../api/v1/domains', '/./api/v1/domains',
  '/api//v1/domains', '//api/v1/domains', '/api/v1/domains/', '/api/v1/domains;x=1', '/api;x=1/v1/domains', '/api/v1/domains?x=1',
  '/api/v1/domains%3Fx=1', '/api/v1/domains%2F', '/%2561pi/v1/domains', '/api/v1/%2e/domains', '/api/v1/domains%00', '/api%2Fv1%2Fdomains',
];

test('every spelling of an API path is metered or a 404 envelope: never unmetered, never a 500', async () => {
  const problems: string[] = [];
  let last = Infinity;
  for (const path of SPELLINGS) {
    const r = await raw(path);
    const remaining = Number(r.headers['ratelimit-remaining']);
    if (r.status >= 500) problems.push(`${path}: ${r.status} ${r.body.slice(0, 100)}`);
    else if (r.status === 200) {
      if (!Number.isFinite(remaining)) problems.push(`${path}: 200 without ratelimit headers (unmetered)`);
      else if (!(remaining < last)) problems.push(`${path}: 200 but the quota did not move (${remaining})`);
      else if (!/"data"/.test(r.body)) problems.push(`${path}: 200 without data`);
    } else {
      let type = '';
      try {
        type = JSON.parse(r.body).error.type;
      } catch {
        problems.push(`${path}: ${r.status} without the error envelope`);
      }
      if (type && !['not_found', 'invalid_request'].includes(type)) problems.push(`${path}: ${r.status} ${type}`);
    }
    if (Number.isFinite(remaining)) last = Math.min(last, remaining);
  }
  assert.deepEqual(problems, []);
});

test('/%61pi/v1/me answers the caller, like /api/v1/me (it answered 500)', async () => {
  const r = await raw('/%61pi/v1/me');
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.body).data.kind, 'anonymous');
  assert.ok(r.headers['ratelimit-limit']);
});
