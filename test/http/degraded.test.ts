// Unhealthy states (docs/contract-decisions.md "Health": 503 with status "degraded" naming the failing part) and
// the internal_error envelope when the store is gone (spec: Errors; no stack trace, retry-after).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startService } from '../helpers/service.ts';
import { expectError } from '../helpers/contract.ts';

test('SMTP stopped → health 503 degraded, smtp "stopped"', async () => {
  const svc = await startService();
  try {
    await svc.service.smtp.close();
    const res = await svc.api('/api/v1/health');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { data: { status: 'degraded', database: 'connected', smtp: 'stopped' } });
  } finally {
    await svc.stop();
  }
});

test('store unreachable → health 503 database "disconnected"; data endpoints 500 internal_error with retry-after', async () => {
  const svc = await startService();
  try {
    await svc.service.store.close();
    const res = await svc.api('/api/v1/health');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { data: { status: 'degraded', database: 'disconnected', smtp: 'running' } });
    const base = svc.http.replace('127.0.0.1', 'localhost');
    for (const [method, path] of [['GET', '/api/v1/inboxes/a%40ephemail.test/emails'], ['GET', '/api/v1/emails/019a0000-0000-7000-8000-000000000000'], ['DELETE', '/api/v1/inboxes/a%40ephemail.test/emails'], ['POST', '/api/v1/keys']]) {
      const r = await svc.api(path, { method });
      const e = await expectError(r, 500, 'internal_error', base);
      assert.doesNotMatch(e.message, /sqlite|database is closed|TypeError|at \//i, 'no internals in the message');
      const ra = r.headers.get('retry-after');
      assert.ok(ra && Number(ra) >= 1, `retry-after on internal_error: ${ra}`);
    }
  } finally {
    await svc.stop();
  }
});
