// Keys and limits (spec: Authentication, Limits; docs/contract-decisions.md "POST /keys", "Rate-limit windows").
// A test that counts within one fixed window owns the service's clock: it moves it to a fresh minute
// (or to midday, for the daily quota) instead of waiting for one.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { expectError, expectLimitHeaders } from '../helpers/contract.ts';
import { movableClock } from '../helpers/time.ts';

const baseOf = (svc: TestService) => svc.http.replace('127.0.0.1', 'localhost');
const mint = async (svc: TestService, label = '') => {
  const res = await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label }) });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).data.api_key as string;
};

describe('key minting: 3 per IP per 24 h', () => {
  let svc: TestService;
  const clock = movableClock();
  before(async () => (svc = await startService({}, { clock })));
  after(() => svc.stop());

  test('4th key from one IP → 429 rate_limited with retry-after up to 24 h', async () => {
    for (let i = 0; i < 3; i++) await mint(svc, `k${i}`);
    const res = await svc.api('/api/v1/keys', { method: 'POST' });
    expectLimitHeaders(res);
    await expectError(res, 429, 'rate_limited', baseOf(svc));
    const ra = Number(res.headers.get('retry-after'));
    assert.ok(ra > 86_000 && ra <= 86_400, `retry-after ~24h: ${ra}`);
  });

  test('a day later the window is free again, and parallel mints never exceed the limit', async () => {
    clock.advance(86_400_000); // the three keys above leave the 24 h window
    const results = await Promise.all(Array.from({ length: 10 }, () => svc.api('/api/v1/keys', { method: 'POST' })));
    assert.equal(results.filter((r) => r.status === 201).length, 3);
    assert.equal(results.filter((r) => r.status === 429).length, 7);
  });
});

describe('authentication', () => {
  let svc: TestService;
  let key: string;
  const clock = movableClock();
  before(async () => {
    svc = await startService({}, { clock });
    key = await mint(svc, 'auth');
  });
  after(() => svc.stop());

  test('Bearer and X-API-Key both select the key bucket (limit 300)', async () => {
    for (const headers of [{ authorization: `Bearer ${key}` }, { 'x-api-key': key }, { authorization: `bearer ${key}` }] as Record<string, string>[]) {
      const res = await svc.api('/api/v1/domains', { headers });
      assert.equal(res.status, 200);
      assert.equal(expectLimitHeaders(res).limit, 300);
    }
    const anon = await svc.api('/api/v1/domains');
    assert.equal(expectLimitHeaders(anon).limit, 60);
  });

  test('both headers with the same key are fine; with different keys → 401', async () => {
    assert.equal((await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${key}`, 'x-api-key': key } })).status, 200);
    await expectError(await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${key}`, 'x-api-key': `eph_${'A'.repeat(40)}` } }), 401, 'unauthorized', baseOf(svc));
  });

  test('invalid key → 401 unauthorized, no silent downgrade, on endpoints needing no key', async () => {
    const bad = [`eph_${'x'.repeat(40)}`, 'garbage', key.slice(0, -1), `${key}x`];
    const endpoints: [string, string][] = [
      ['GET', '/api/v1/me'], ['GET', '/api/v1/domains'], ['POST', '/api/v1/inboxes'], ['GET', '/api/v1/inboxes/a%40ephemail.test/emails'],
      ['DELETE', '/api/v1/inboxes/a%40ephemail.test/emails'], ['GET', '/api/v1/emails/019a0000-0000-7000-8000-000000000000'], ['POST', '/api/v1/keys'],
      ['GET', '/api/v1'], ['GET', '/api/v1/health'], ['GET', '/api/v1/openapi.json'],
    ];
    for (const k of bad) {
      for (const [method, path] of endpoints) {
        for (const headers of [{ authorization: `Bearer ${k}` }, { 'x-api-key': k }] as Record<string, string>[]) {
          const res = await svc.api(path, { method, headers });
          expectLimitHeaders(res);
          await expectError(res, 401, 'unauthorized', baseOf(svc));
        }
      }
    }
  });

  test('a malformed Authorization header is 401, not anonymous', async () => {
    for (const authorization of ['Basic dXNlcjpwYXNz', 'Bearer', key, 'Token abc']) {
      await expectError(await svc.api('/api/v1/me', { headers: { authorization } }), 401, 'unauthorized', baseOf(svc));
    }
  });

  test('a key has its own bucket: key requests do not use the IP bucket', async () => {
    clock.freshMinute();
    const before = (await (await svc.api('/api/v1/me')).json()).data.usage.requests_this_minute;
    for (let i = 0; i < 5; i++) await svc.api('/api/v1/domains', { headers: { 'x-api-key': key } });
    const afterAnon = (await (await svc.api('/api/v1/me')).json()).data.usage.requests_this_minute;
    assert.equal(afterAnon, before);
    const me = (await (await svc.api('/api/v1/me', { headers: { 'x-api-key': key } })).json()).data;
    assert.ok(me.usage.requests_this_minute >= 5);
    assert.ok(me.usage.requests_today >= 5);
  });
});

describe('anonymous per-minute limit (5)', () => {
  let svc: TestService;
  const clock = movableClock();
  before(async () => (svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '5' }, { clock })));
  after(() => svc.stop());

  test('remaining counts down; 6th → 429 rate_limited with retry-after; outside-quota endpoints unaffected', async () => {
    clock.freshMinute();
    // POST /keys is inside the quota (the spec lists what is outside): it is request 1 of 5
    const key = await mint(svc);
    // the outside-quota endpoints and /me do not consume
    for (let i = 0; i < 3; i++) {
      for (const p of ['/api/v1', '/api/v1/openapi.json', '/api/v1/health', '/api/v1/me']) {
        const res = await svc.api(p);
        assert.equal(res.status, 200, p);
        const h = expectLimitHeaders(res, p);
        assert.equal(h.limit, 5);
        assert.equal(h.remaining, 4, `${p} leaves remaining at 4`);
        await res.arrayBuffer();
      }
    }
    const remaining: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await svc.api('/api/v1/domains');
      assert.equal(res.status, 200);
      const h = expectLimitHeaders(res);
      remaining.push(h.remaining);
      // the minute began at most a few seconds ago (freshMinute)
      assert.ok(h.reset >= 50 && h.reset <= 60, `reset ${h.reset}`);
    }
    assert.deepEqual(remaining, [3, 2, 1, 0]);
    const me = (await (await svc.api('/api/v1/me')).json()).data;
    assert.equal(me.usage.requests_this_minute, 5);
    const limited = await svc.api('/api/v1/inboxes', { method: 'POST' });
    const h = expectLimitHeaders(limited);
    assert.equal(h.remaining, 0);
    const e = await expectError(limited, 429, 'rate_limited', baseOf(svc));
    const retry = Number(limited.headers.get('retry-after'));
    assert.ok(retry >= 50 && retry <= 60, `retry-after until the fresh minute ends: ${retry}`);
    assert.match(e.message, /minute/);
    await expectError(await svc.api('/api/v1/domains'), 429, 'rate_limited', baseOf(svc));
    await expectError(await svc.api('/api/v1/no-such-endpoint'), 429, 'rate_limited', baseOf(svc));
    // outside the quota: still 200 while limited, with the headers unchanged
    for (const p of ['/api/v1', '/api/v1/openapi.json', '/api/v1/health', '/api/v1/me']) {
      const res = await svc.api(p);
      assert.equal(res.status, 200, `${p} outside the quota`);
      assert.equal(expectLimitHeaders(res, p).remaining, 0);
      await res.arrayBuffer();
    }
    // a key is a separate bucket: it still works from the same IP
    const res = await svc.api('/api/v1/domains', { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    assert.equal(expectLimitHeaders(res).limit, 300);
  });
});

describe('daily quota', () => {
  let svc: TestService;
  const clock = movableClock();
  before(async () => {
    clock.toMidday();
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_DAY: '3', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '5', EPHEMAIL_LIMIT_KEY_PER_DAY: '2' }, { clock });
  });
  after(() => svc.stop());

  let key: string;
  test('anonymous: 4th request of the day → 429 quota_exceeded, retry-after until 00:00 UTC', async () => {
    key = await mint(svc); // request 1 of 3
    for (let i = 0; i < 2; i++) assert.equal((await svc.api('/api/v1/domains')).status, 200);
    const res = await svc.api('/api/v1/domains');
    expectLimitHeaders(res);
    const e = await expectError(res, 429, 'quota_exceeded', baseOf(svc));
    assert.match(e.message, /quota|day|daily/i);
    const now = new Date(clock.now());
    const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    const expected = (midnight - now.getTime()) / 1000;
    const ra = Number(res.headers.get('retry-after'));
    assert.ok(Math.abs(ra - expected) < 5, `retry-after ${ra} ≈ ${expected}`);
    assert.equal((await svc.api('/api/v1/health')).status, 200, 'health outside the quota');
    const me = (await (await svc.api('/api/v1/me')).json()).data;
    assert.equal(me.usage.requests_today, 3);
  });

  test('key: its own daily quota', async () => {
    for (let i = 0; i < 2; i++) assert.equal((await svc.api('/api/v1/domains', { headers: { 'x-api-key': key } })).status, 200);
    await expectError(await svc.api('/api/v1/domains', { headers: { 'x-api-key': key } }), 429, 'quota_exceeded', baseOf(svc));
  });

  test('the next day: a used-up day and minute window together stay quota_exceeded (waiting does not help), never rate_limited', async () => {
    clock.advance(86_400_000); // the next day's midday: a fresh day for the IP
    clock.freshMinute();
    for (let i = 0; i < 3; i++) assert.equal((await svc.api('/api/v1/domains')).status, 200);
    // requests 4 to 9: past the day's 3, and from the 6th past the minute's 5 too
    for (let i = 0; i < 6; i++) {
      const res = await svc.api('/api/v1/domains');
      await expectError(res, 429, 'quota_exceeded', baseOf(svc));
      const retry = Number(res.headers.get('retry-after'));
      assert.ok(retry > 11 * 3600 && retry <= 12 * 3600, `retry-after points at 00:00 UTC (12 h away), not the minute window: ${retry}`);
    }
  });
});

describe('exactly the limit under concurrency', () => {
  let svc: TestService;
  const clock = movableClock();
  before(async () => (svc = await startService({}, { clock })));
  after(() => svc.stop());

  test('200 parallel anonymous requests with limit 60 → exactly 60 succeed', async () => {
    clock.freshMinute();
    const results = await Promise.all(Array.from({ length: 200 }, async () => {
      const res = await svc.api('/api/v1/domains');
      await res.arrayBuffer();
      return res;
    }));
    assert.equal(results.filter((r) => r.status === 200).length, 60);
    assert.equal(results.filter((r) => r.status === 429).length, 140);
    for (const r of results) expectLimitHeaders(r);
    for (const r of results.filter((x) => x.status === 429)) assert.ok(Number(r.headers.get('retry-after')) >= 1);
  });
});

describe('client IP behind a proxy (EPHEMAIL_TRUST_PROXY)', () => {
  test('untrusted: X-Forwarded-For is ignored, so it gives no fresh bucket', async () => {
    const clock = movableClock();
    clock.freshMinute();
    const svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '2' }, { clock });
    try {
      for (let i = 0; i < 2; i++) assert.equal((await svc.api('/api/v1/domains', { headers: { 'x-forwarded-for': `10.0.0.${i}` } })).status, 200);
      await expectError(await svc.api('/api/v1/domains', { headers: { 'x-forwarded-for': '10.0.0.99' } }), 429, 'rate_limited', baseOf(svc));
    } finally {
      await svc.stop();
    }
  });

  test('trusted: each forwarded client IP has its own bucket, and key minting counts per forwarded IP', async () => {
    const clock = movableClock();
    clock.freshMinute();
    const svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '2', EPHEMAIL_TRUST_PROXY: 'true' }, { clock });
    try {
      const as = (ip: string, init: RequestInit = {}) => svc.api('/api/v1/domains', { ...init, headers: { 'x-forwarded-for': ip } });
      for (let i = 0; i < 2; i++) assert.equal((await as('203.0.113.1')).status, 200);
      await expectError(await as('203.0.113.1'), 429, 'rate_limited', baseOf(svc));
      assert.equal((await as('203.0.113.2')).status, 200);
      const me = (await (await svc.api('/api/v1/me', { headers: { 'x-forwarded-for': '203.0.113.2' } })).json()).data;
      assert.equal(me.usage.requests_this_minute, 1);
    } finally {
      await svc.stop();
    }
  });
});
