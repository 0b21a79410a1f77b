// Who may do what with SMTP fault rules (docs/faults.md "Who can do what"), over real sockets, on
// SQLite (one node) and on Redis (two nodes of one store): each key has its own 20 rules per address,
// so one key never keeps another from adding its own; a revoked key's rules stop applying on every
// node within 2 s, whether the admin API or the CLI (the store) revoked it; the admin API lists and
// removes any key's rules by address, by key or both. And failed admin-token attempts: per client
// (IP, IPv6 /64), counted on every node together, 429 with Retry-After past 10 a minute (a right
// token too, from that client), other clients unaffected, and a bounded number of log lines.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { closeClient, connect, parseRedisUrl, whenReady } from '../../src/redis/client.ts';
import { ADMIN_FAILURES_PER_MINUTE, REFUSED_LINES_PER_MINUTE } from '../../src/http/routes/admin.ts';
import { expectError } from '../helpers/contract.ts';
import { captureLog, type CapturedLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { movableClock, until } from '../helpers/time.ts';
import { SKIP_REDIS, countPrefix, describeRedis, dropPrefix, testStoreUrl, TEST_REDIS_URL } from '../redis/servers.ts';

const TOKEN = 'fault-owner-admin-token-0123456789abcdef';
const json = { 'content-type': 'application/json' };
const enc = encodeURIComponent;

function ownershipSuite(name: string, skip: string | false, env: () => Record<string, string>, nodes: 1 | 2, cleanup?: () => Promise<void>) {
  describeRedis(`fault rules: who can do what (${name})`, { skip, concurrency: 1 }, () => {
    let svcs: TestService[] = [];
    let logs: CapturedLog;
    let A: TestService;
    let B: TestService;
    let base: string;
    // the nodes' one clock: a test counting within a minute window moves it to a fresh minute
    const clock = movableClock();
    before(async () => {
      logs = captureLog('info');
      const e = { ...env(), EPHEMAIL_ADMIN_TOKEN: TOKEN, EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '20', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000', EPHEMAIL_TRUST_PROXY: '127.0.0.1' };
      svcs = [];
      for (let i = 0; i < nodes; i++) svcs.push(await startService(e, { log: logs.log, clock }));
      [A, B] = [svcs[0], svcs[nodes - 1]];
      base = A.http.replace('127.0.0.1', 'localhost');
    });
    after(async () => {
      await Promise.all(svcs.map((s) => s.stop()));
      await cleanup?.();
    });

    const mint = async (svc = A) => (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
    const add = (key: string, address: string, body: unknown, svc = A) =>
      svc.api(`/api/v1/inboxes/${enc(address)}/faults`, { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
    const list = async (key: string, address: string, svc = A) => (await (await svc.api(`/api/v1/inboxes/${enc(address)}/faults`, { headers: { authorization: `Bearer ${key}` } })).json()) as any;
    const admin = (path: string, init: { method?: string; ip?: string; token?: string } = {}, svc = A) =>
      svc.api(`/api/v1/admin${path}`, { method: init.method ?? 'GET', headers: { authorization: `Bearer ${init.token ?? TOKEN}`, ...(init.ip ? { 'x-forwarded-for': init.ip } : {}) } });
    const rcpt = async (svc: TestService, to: string) => (await sendRaw(svc.smtpPort, { from: 's@example.org', to: [to], body: message({ Subject: 'x' }, 'x') })).rcpt[0];
    const baseOf = (svc: TestService) => svc.http.replace('127.0.0.1', 'localhost');
    const address = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}@ephemail.test`;

    test('each key has its own 20 rules per address: a key that filled its share gets 409, another key still adds its own and sees how many others there are', async () => {
      const [a, b] = [await mint(), await mint()];
      const to = address('share');
      for (let i = 0; i < 20; i++) assert.equal((await add(a, to, { stage: 'rcpt', reply: `550 5.1.1 locked ${i}` })).status, 201);
      await expectError(await add(a, to, { stage: 'rcpt', reply: '550 5.1.1 one more' }), 409, 'conflict', base, /this key already has 20 fault rules on /);
      const own = await add(b, to, { stage: 'rcpt', reply: '451 4.7.1 the owner', times: 1 }, B);
      assert.equal(own.status, 201, await own.clone().text());
      const mine = await list(b, to, B);
      assert.deepEqual(mine.meta, { address: to, count: 1, other_rules: 20 });
      assert.equal(mine.data[0].reply, '451 4.7.1 the owner');
      assert.equal((await list(a, to)).meta.other_rules, 1);
      // rules apply in creation order: the first key's come first
      assert.equal((await rcpt(B, to)).code, 550);
    });

    test('a key revoked through the admin API: its rules stop applying on every node within 2 s (the next key\'s rule answers) and are removed', async () => {
      const [a, b] = [await mint(), await mint()];
      const to = address('revoked');
      assert.equal((await add(a, to, { stage: 'rcpt', reply: '550 5.1.1 locked out' })).status, 201);
      assert.equal((await add(a, to, { stage: 'data', reply: '554 5.7.1 locked out' })).status, 201);
      assert.equal((await add(a, address('elsewhere'), { stage: 'rcpt', reply: '550 5.1.1 locked out' })).status, 201);
      assert.equal((await add(b, to, { stage: 'rcpt', reply: '451 4.7.1 the owner\'s rule', times: 1 })).status, 201);
      for (const svc of svcs) assert.equal((await rcpt(svc, to)).code, 550);
      const revoked = await admin(`/keys/${a.slice(0, 12)}`, { method: 'DELETE' });
      assert.equal(revoked.status, 200);
      const t0 = performance.now();
      const first = await rcpt(B, to);
      assert.equal(first.code, 451, 'the other key\'s rule answers now');
      assert.equal(first.text, '4.7.1 the owner\'s rule');
      for (const svc of svcs) {
        const r = await sendRaw(svc.smtpPort, { from: 's@example.org', to: [to], body: message({ Subject: 'x' }, 'x') });
        assert.equal(r.rcpt[0].code, 250);
        assert.equal(r.data?.code, 250, 'the revoked key\'s data rule applies no more');
      }
      // bound: at once here; the promise is 2 s on every node
      assert.ok(performance.now() - t0 < 2000);
      const left = await (await admin(`/faults?key_prefix=${a.slice(0, 12)}`)).json();
      assert.deepEqual(left, { data: [], meta: { count: 0 } }, 'the revoked key\'s rules were removed, on every address');
    });

    test('a key revoked in the store (as `ephemail keys revoke` does): its rules stop applying on every node within 2 s', async () => {
      const a = await mint();
      const to = address('cli');
      assert.equal((await add(a, to, { stage: 'rcpt', reply: '550 5.1.1 locked out' })).status, 201);
      assert.equal((await rcpt(B, to)).code, 550);
      const listed = (await (await admin(`/faults?address=${enc(to)}`)).json()).data;
      assert.deepEqual(listed.map((r: any) => [r.key_prefix, r.key_revoked]), [[a.slice(0, 12), false]]);
      assert.equal((await A.service.store.revokeKeys(a.slice(0, 12), Date.now())).length, 1);
      const t0 = performance.now();
      await until(async () => (await Promise.all(svcs.map((s) => rcpt(s, to)))).every((r) => r.code === 250), 'every node delivers', 2000, 50);
      // bound: the promise (2 s on every node), one-sided
      assert.ok(performance.now() - t0 < 2000);
    });

    test('the admin API lists any key\'s rules (by address, by key, both) and removes them; they stop applying at once', async () => {
      const [a, b] = [await mint(), await mint()];
      const [x, y] = [address('opx'), address('opy')];
      const made: Record<string, string> = {};
      for (const [k, to, name] of [[a, x, 'ax'], [b, x, 'bx'], [a, y, 'ay'], [b, y, 'by']] as const) {
        const r = await add(k, to, { stage: 'rcpt', reply: `550 5.1.1 rule ${name}` });
        made[name] = (await r.json()).data.id;
      }
      const ids = async (q: string, svc = A) => {
        const res = await admin(`/faults?${q}`, {}, svc);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
        const body = await res.json();
        assert.equal(body.meta.count, body.data.length);
        return body.data.map((r: any) => r.id);
      };
      assert.deepEqual(await ids(`address=${enc(x.toUpperCase())}`, B), [made.ax, made.bx]);
      assert.deepEqual(await ids(`key_prefix=${a.slice(0, 12)}`), [made.ax, made.ay]);
      assert.deepEqual(await ids(`address=${enc(y)}&key_prefix=${b.slice(0, 12)}`), [made.by]);
      const one = (await (await admin(`/faults?address=${enc(y)}&key_prefix=${b.slice(0, 12)}`)).json()).data[0];
      assert.deepEqual(Object.keys(one).sort(), ['address', 'created_at', 'expires_at', 'id', 'key_prefix', 'key_revoked', 'remaining', 'reply', 'stage', 'times']);
      assert.equal(one.key_prefix, b.slice(0, 12));
      assert.ok(!JSON.stringify(one).includes(b.slice(12)), 'never the key');

      await expectError(await admin('/faults'), 400, 'invalid_request', base, /address, query\.key_prefix or both/);
      await expectError(await admin('/faults?key_prefix=eph_abc'), 400, 'invalid_request', base, /whole 12-character key prefix/);
      await expectError(await admin('/faults?key_prefix=eph_ZZZZZZZZ'), 404, 'not_found', base, /No key has the prefix eph_ZZZZZZZZ/);
      await expectError(await admin('/faults?address=not-an-address'), 400, 'invalid_request', base);
      await expectError(await admin(`/faults?address=${enc('a@elsewhere.example')}`), 404, 'not_found', base);
      await expectError(await admin('/faults?nope=1'), 400, 'invalid_request', base, /nope/);
      await expectError(await admin('/faults', { token: 'wrong-token' }), 401, 'unauthorized', base);

      const del = async (q: string) => {
        const res = await admin(`/faults?${q}`, { method: 'DELETE' }, B);
        assert.equal(res.status, 200);
        return (await res.json()).data.deleted as number;
      };
      assert.equal(await del(`address=${enc(y)}&key_prefix=${b.slice(0, 12)}`), 1);
      assert.equal(await del(`key_prefix=${a.slice(0, 12)}`), 2);
      assert.deepEqual(await ids(`address=${enc(x)}`), [made.bx]);
      for (const svc of svcs) assert.equal((await rcpt(svc, y)).code, 250, 'y has no rule left');
      assert.equal(await del(`address=${enc(x)}`), 1);
      assert.equal(await del(`address=${enc(x)}`), 0);
      for (const svc of svcs) assert.equal((await rcpt(svc, x)).code, 250);
      assert.deepEqual((await list(b, x)).data, [], 'the key sees its rule gone');
    });

    test('failed admin-token attempts: 401 up to 10 a minute per client (on every node together), then 429 with Retry-After even for the right token; other clients unaffected; bounded log lines', async () => {
      const attacker = '203.0.113.7';
      // the count is per minute window: the whole test in one
      clock.freshMinute();
      for (let i = 0; i < ADMIN_FAILURES_PER_MINUTE; i++) {
        // split between the nodes: counted together
        const svc = i % 2 ? B : A;
        await expectError(await admin('/keys', { token: `wrong-${i}`, ip: attacker }, svc), 401, 'unauthorized', baseOf(svc));
      }
      for (const svc of svcs) {
        for (const token of ['wrong-again', TOKEN]) {
          const res = await admin('/domains', { token, ip: attacker }, svc);
          assert.ok(Number(res.headers.get('retry-after')) >= 1 && Number(res.headers.get('retry-after')) <= 60, `retry-after ${res.headers.get('retry-after')}`);
          await expectError(res, 429, 'rate_limited', baseOf(svc), /More than 10 failed admin-token attempts from this address this minute; retry in \d+ s/);
        }
      }
      // another address, and another /64 of IPv6, are not throttled
      assert.equal((await admin('/domains', { ip: '198.51.100.20' })).status, 200);
      for (let i = 0; i < ADMIN_FAILURES_PER_MINUTE + 2; i++) await (await admin('/domains', { token: 'x', ip: '2001:db8:1:2::5' })).arrayBuffer();
      assert.equal((await admin('/domains', { ip: '2001:db8:1:2:ffff::9' })).status, 429, 'the same /64');
      assert.equal((await admin('/domains', { ip: '2001:db8:1:3::5' })).status, 200, 'another /64');
      // a spray of wrong tokens from many addresses: bounded lines in the log
      const before = logs.find('admin call refused').length;
      for (let i = 0; i < 200; i++) await (await admin('/keys', { token: 'guess', ip: `192.0.2.${i % 250}` }, svcs[i % svcs.length])).arrayBuffer();
      const lines = logs.find('admin call refused').length - before;
      assert.ok(lines <= REFUSED_LINES_PER_MINUTE * svcs.length, `at most ${REFUSED_LINES_PER_MINUTE} lines a minute per node: ${lines} lines for 200 refusals`);
      // the next minute's first call logs how many were not logged one by one
      const counts = () => logs.find('admin calls refused and not logged one by one last minute').map((l) => (l.admin as { refused_unlogged: number }).refused_unlogged);
      const countsBefore = counts().length;
      clock.freshMinute();
      for (const svc of svcs) await (await admin('/keys', { token: 'guess', ip: '192.0.2.1' }, svc)).arrayBuffer();
      const unlogged = counts().slice(countsBefore);
      assert.equal(unlogged.length, svcs.length, 'one count per node');
      assert.ok(unlogged.reduce((a, b) => a + b, 0) >= 200 - lines, 'every refusal of the spray not logged is counted');
      assert.ok(!JSON.stringify(logs.lines).includes(TOKEN), 'the token is never logged');
    });
  });
}

ownershipSuite('sqlite', false, () => ({}), 1);

const prefix = `ephtest:ownership:${randomUUID().slice(0, 8)}:`;
ownershipSuite('redis, two nodes', SKIP_REDIS, () => ({ EPHEMAIL_STORE: testStoreUrl(prefix), EPHEMAIL_SESSION_SECRET: 'fault-ownership-secret-of-at-least-32-bytes' }), 2, async () => {
  const redis = connect(parseRedisUrl(TEST_REDIS_URL));
  await whenReady(redis, 10_000);
  await dropPrefix(redis as never, prefix);
  assert.equal(await countPrefix(redis as never, prefix), 0);
  await closeClient(redis);
});
