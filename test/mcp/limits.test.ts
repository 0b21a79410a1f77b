// Tool-endpoint rate limits (docs/contract-decisions.md "Tool endpoint limits"): a signed Mcp-Session-Id is its own
// anonymous bucket; initialize and requests without a valid id (invented, forged, tampered) pay from
// the IP's bucket; over the limit, tools/call is an isError result and other methods a 429.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createSessionIds } from '../../src/mcp/session.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { INIT_PARAMS, rpc } from './helpers.ts';

// mid-minute, mid-day: no window rolls over during the test
const T = Date.UTC(2026, 5, 15, 12, 0, 20);
const fixedClock = { now: () => T };

const init = async (svc: TestService) => {
  const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() });
  return { res, id: res.headers.get('mcp-session-id') };
};
const list = (svc: TestService, session?: string) => rpc(svc, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, session === undefined ? {} : { 'mcp-session-id': session });

describe('session ids (unit)', () => {
  const t = 1_800_000_000_000;
  test('issued ids verify with the same secret only; tampered and malformed ids do not', () => {
    const a = createSessionIds('secret-one');
    const b = createSessionIds('secret-one');
    const c = createSessionIds('secret-two');
    const id = a.issue(t);
    assert.match(id, /^[A-Za-z0-9_-]{22}\.[0-9a-z]+\.[A-Za-z0-9_-]{22}$/);
    assert.deepEqual(a.check(id, t), { bucket: `mcp:${id.split('.')[0]}` });
    assert.deepEqual(b.check(id, t), a.check(id, t), 'another node with the same EPHEMAIL_SESSION_SECRET accepts it');
    assert.equal(c.check(id, t), null);
    const [nonce, issued, sig] = id.split('.');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    assert.equal(a.check(`${flip(nonce)}.${issued}.${sig}`, t), null, 'new nonce, old signature');
    assert.equal(a.check(`${nonce}.${issued}.${flip(sig)}`, t), null, 'tampered signature');
    assert.equal(a.check(`${nonce}.${(parseInt(issued, 36) + 3600).toString(36)}.${sig}`, t), null, 'a later issue time is not signed');
    for (const bad of [undefined, '', 'abc', crypto.randomUUID(), `${id}.x`, `${nonce}.${sig}`, `${nonce}${sig}`]) assert.equal(a.check(bad, t), null, String(bad));
    const random = createSessionIds(null);
    assert.equal((random.check(random.issue(t), t) as { bucket: string }).bucket.startsWith('mcp:'), true);
    assert.equal(createSessionIds(null).check(random.issue(t), t), null, 'a random per-process secret is not shared');
  });

  test('an id expires 24 hours after it was issued', () => {
    const a = createSessionIds('secret-one');
    const id = a.issue(t);
    assert.ok(a.check(id, t + 24 * 3600_000 - 2000) && 'bucket' in a.check(id, t + 24 * 3600_000 - 2000)!);
    assert.deepEqual(a.check(id, t + 24 * 3600_000), { expired: true });
  });
});

describe('sessions expire and cannot multiply the IP quota', () => {
  let now = T;
  const clock = { now: () => now };
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '2', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000' }, { clock });
  });
  after(() => svc.stop());

  test('an expired session id gets 404 and a JSON-RPC error that says to initialize again', async () => {
    now = T;
    const { id } = await init(svc);
    assert.equal((await list(svc, id!)).status, 200);
    now = T + 24 * 3600_000 + 1000;
    const res = await list(svc, id!);
    assert.equal(res.status, 404);
    const body = await res.json();
    assert.equal(body.id, 9);
    assert.equal(body.error.code, -32001);
    assert.match(body.error.message, /initialize again/);
    now = T;
  });

  test('all sessions of one IP together are capped at 5 times the IP quota', async () => {
    // initialize is paid by the IP (2 a minute), but sessions live a day: mint 8 over 4 minutes
    now = T + 2 * 3600_000;
    const ids: string[] = [];
    for (let m = 0; m < 4; m++) {
      now += 60_000;
      for (let i = 0; i < 2; i++) ids.push((await init(svc)).id!);
    }
    assert.equal(ids.filter(Boolean).length, 8);
    // then use them all in one minute: each may make 2 calls, all of them together 5 × 2
    now += 60_000;
    let served = 0;
    const refusals: string[] = [];
    for (const id of ids) {
      for (let i = 0; i < 2; i++) {
        const res = await list(svc, id);
        if (res.status === 200) served++;
        else refusals.push((await res.json()).error.message);
      }
    }
    assert.equal(served, 10, 'the ceiling: 5 times the IP quota of 2 a minute');
    assert.equal(refusals.length, 6);
    assert.match(refusals[0], /all sessions of this IP together/);
    now = T;
  });
});

describe('tool endpoint limits', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '4', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000' }, { clock: fixedClock });
  });
  after(() => svc.stop());

  test('each session has its own bucket; invented ids and initialize pay from the IP bucket', async () => {
    const s1 = await init(svc); // IP: 1 of 4
    const s2 = await init(svc); // IP: 2 of 4
    assert.equal(s1.res.headers.get('ratelimit-limit'), '4');
    assert.equal(s2.res.headers.get('ratelimit-remaining'), '2');

    // session 1: four requests of its own, then 429 for a method, isError for tools/call
    for (let i = 0; i < 4; i++) {
      const res = await list(svc, s1.id!);
      assert.equal(res.status, 200, `session request ${i + 1}`);
      assert.equal(res.headers.get('ratelimit-remaining'), String(3 - i));
    }
    const over = await list(svc, s1.id!);
    assert.equal(over.status, 429);
    assert.ok(Number(over.headers.get('retry-after')) >= 1);
    const body = await over.json();
    assert.equal(body.id, 9);
    assert.equal(body.error.code, -32000);
    assert.equal(body.error.data.type, 'rate_limited');
    assert.match(body.error.message, /More than 4 calls this minute for this Mcp-Session-Id/);

    const call = await rpc(svc, { jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'create_inbox', arguments: {} } }, { 'mcp-session-id': s1.id! });
    assert.equal(call.status, 200);
    const result = (await call.json()).result;
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent, undefined);
    assert.match(result.content[0].text, /^Error \(rate_limited\): More than 4 calls this minute for this Mcp-Session-Id\. Retry after \d+ s\./);

    // session 2 is untouched by session 1
    assert.equal((await list(svc, s2.id!)).status, 200);

    // invented, forged and missing ids all share the IP's bucket: 2 left
    const [nonce] = s1.id!.split('.');
    const forged = `${nonce.slice(0, 21)}${nonce[21] === 'A' ? 'B' : 'A'}.${s1.id!.split('.')[1]}`;
    assert.equal((await list(svc, crypto.randomUUID())).status, 200);
    assert.equal((await list(svc, forged)).status, 200);
    const ipOver = await list(svc, 'made-up-session');
    assert.equal(ipOver.status, 429);
    assert.match((await ipOver.json()).error.message, /this IP/);
    assert.equal((await list(svc)).status, 429, 'no session id: the same IP bucket');

    // initialize counts against the IP, so it is refused too
    const again = await init(svc);
    assert.equal(again.res.status, 429);
    assert.equal(again.id, null, 'no session id on a refused initialize');

    // a rate-limited tools/call without a session says how to get a bucket of one's own
    const anon = await (await rpc(svc, { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'check_inbox', arguments: { address: 'a@ephemail.test' } } })).json();
    assert.equal(anon.result.isError, true);
    assert.match(anon.result.content[0].text, /send the Mcp-Session-Id from initialize/);

    // notifications are not counted and not refused
    assert.equal((await rpc(svc, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': s1.id! })).status, 202);
  });
});

describe('tool endpoint daily quota', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100', EPHEMAIL_LIMIT_ANON_PER_DAY: '2' }, { clock: fixedClock });
  });
  after(() => svc.stop());

  test('a session over its daily quota gets quota_exceeded with the reset time', async () => {
    const { id } = await init(svc);
    const call = () => rpc(svc, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'create_inbox', arguments: {} } }, { 'mcp-session-id': id! });
    for (let i = 0; i < 2; i++) assert.equal((await (await call()).json()).result.isError, undefined);
    const res = await call();
    const text = (await res.json()).result.content[0].text as string;
    assert.match(text, /^Error \(quota_exceeded\): The daily quota of 2 calls for this Mcp-Session-Id is used up; it resets at 00:00 UTC/);
    assert.equal(Number(res.headers.get('retry-after')), 12 * 3600 - 20);
  });
});

describe('tool endpoint: day and minute used up together', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '2', EPHEMAIL_LIMIT_ANON_PER_DAY: '2' }, { clock: fixedClock });
  });
  after(() => svc.stop());

  test('reports quota_exceeded (waiting a minute would not help), never rate_limited', async () => {
    const { id } = await init(svc);
    const call = () => rpc(svc, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'create_inbox', arguments: {} } }, { 'mcp-session-id': id! });
    for (let i = 0; i < 2; i++) assert.equal((await (await call()).json()).result.isError, undefined);
    for (let i = 0; i < 2; i++) {
      const res = await call();
      const text = (await res.json()).result.content[0].text as string;
      assert.match(text, /^Error \(quota_exceeded\)/, text);
      assert.equal(Number(res.headers.get('retry-after')), 12 * 3600 - 20, 'until midnight UTC, not the end of the minute');
    }
  });
});

describe('session ids across nodes', () => {
  const secret = { EPHEMAIL_SESSION_SECRET: 'shared-secret-for-all-nodes-at-least-32-bytes', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '2' };
  let a: TestService;
  let b: TestService;
  let c: TestService;
  before(async () => {
    a = await startService(secret, { clock: fixedClock });
    b = await startService(secret, { clock: fixedClock });
    c = await startService({ ...secret, EPHEMAIL_SESSION_SECRET: 'another-secret-also-at-least-32-bytes-long' }, { clock: fixedClock });
  });
  after(async () => {
    await Promise.all([a.stop(), b.stop(), c.stop()]);
  });

  test('an id issued by one node is a session bucket on another node with the same EPHEMAIL_SESSION_SECRET', async () => {
    const { id } = await init(a);
    for (const node of [b, c]) {
      assert.equal((await list(node)).status, 200);
      assert.equal((await list(node)).status, 200);
      assert.equal((await list(node)).status, 429, 'the IP bucket of this node is used up');
    }
    assert.equal((await list(b, id!)).status, 200, 'same secret: its own bucket');
    assert.equal((await list(c, id!)).status, 429, 'other secret: an unknown id, so the IP bucket');
  });
});
