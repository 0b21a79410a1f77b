// Three real `ephemail` processes against one Redis behave as one service: mail through A is listed
// on B and C; a wait held on B wakes within 100 ms of A's 250; a key's concurrent waits hold across
// the three, and its per-minute limit across three nodes (in this process, on one clock the test
// moves to a fresh minute: no waiting for the wall clock's); ids from concurrent deliveries through all three nodes
// increase in the order they become visible, so a reader advancing `since` never skips mail; body
// search (`text=`) reads the search texts kept in Redis on any node and derives nothing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { startService } from '../helpers/service.ts';
import { movableClock, until } from '../helpers/time.ts';
import { startNodes, type Node } from './nodes.ts';
import { SKIP_REDIS, TEST_REDIS_URL, countPrefix, dropPrefix, describeRedis, testStoreUrl } from './servers.ts';

const PER_MINUTE = 30;
const WAITS = 3;
const prefix = `ephtest:multi:${randomUUID().slice(0, 8)}:`;
const addr = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}@ephemail.test`;
const enc = encodeURIComponent;

describeRedis('three ephemail nodes, one Redis', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  let nodes: Node[] = [];
  let redis: RedisClient;
  let env: Record<string, string> = {};
  const [A, B, C] = [0, 1, 2].map((i) => () => nodes[i]);

  const mintKey = async (node: Node): Promise<string> => {
    const res = await node.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label: 'multinode' }) });
    assert.equal(res.status, 201);
    return ((await res.json()) as { data: { api_key: string } }).data.api_key;
  };
  const list = async (node: Node, address: string, query = '', key?: string) => {
    const res = await node.api(`/api/v1/inboxes/${enc(address)}/emails${query}`, key ? { headers: { authorization: `Bearer ${key}` } } : undefined);
    return { status: res.status, body: (await res.json()) as { data: { id: string; subject: string }[]; meta: { waited: boolean }; error?: { type: string } } };
  };

  before(async () => {
    redis = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(redis, 10_000);
    env = {
      EPHEMAIL_STORE: testStoreUrl(prefix),
      EPHEMAIL_SESSION_SECRET: 'multinode-test-secret-of-at-least-32-bytes',
      EPHEMAIL_LIMIT_KEY_PER_MINUTE: String(PER_MINUTE),
      EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: String(WAITS),
      EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '20',
      EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000',
      EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000',
    };
    nodes = await startNodes(['A', 'B', 'C'], env);
  });

  after(async () => {
    const codes = await Promise.all(nodes.map((n) => n.stop()));
    assert.deepEqual(codes, nodes.map(() => 0), 'every node exits 0 on SIGTERM');
    await dropPrefix(redis as never, prefix);
    assert.equal(await countPrefix(redis as never, prefix), 0);
    await closeClient(redis);
  });

  it('mail sent to A over SMTP is listed on B and C, and readable there', async () => {
    const to = addr('abc');
    const { response } = await A().send(to, 'through A');
    assert.match(response, /^250/);
    for (const node of [B(), C()]) {
      const { status, body } = await list(node, to);
      assert.equal(status, 200);
      assert.deepEqual(body.data.map((e) => e.subject), ['through A']);
      const full = await node.api(`/api/v1/emails/${body.data[0].id}`);
      assert.equal(full.status, 200);
    }
  });

  it('text= on B finds mail sent through A by its body (the search text kept in Redis); a text= wait held on C wakes only on a match; no views derived', async () => {
    const to = addr('text');
    await A().send(to, 'first', 'Your code is\r\n 424242. Nothing else.');
    await A().send(to, 'second', 'No code in here.');
    const derived = async (node: Node) => (await (await node.api('/metrics')).text()).split('\n')
      .filter((l) => l.startsWith('ephemail_derivation_seconds_count')).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    const before = await Promise.all([A(), B(), C()].map(derived));
    assert.deepEqual((await list(B(), to, '?text=CODE%20IS%20424242')).body.data.map((e) => e.subject), ['first']);
    assert.deepEqual((await list(B(), to, '?text=code%20in')).body.data.map((e) => e.subject), ['second']);
    const key = await mintKey(C());
    const held = list(C(), to, '?text=open%20sesame&wait=10', key);
    await until(async () => (await C().heldWaits()) === 1, 'C holds the wait');
    await A().send(to, 'third', 'Still nothing.');
    await A().send(to, 'fourth', 'The word is Open  Sesame.');
    const { body } = await held;
    assert.deepEqual(body.data.map((e) => e.subject), ['fourth']);
    assert.equal(body.meta.waited, true);
    assert.deepEqual(await Promise.all([A(), B(), C()].map(derived)), before, 'no node derived views for the searches');
  });

  it("a wait held on B is woken by A's 250, well before its deadline", async () => {
    const key = await mintKey(C());
    const to = addr('wait');
    for (let round = 0; round < 3; round++) {
      const held = list(B(), to, '?wait=10', key).then((r) => ({ ...r, at: performance.now() }));
      await until(async () => (await B().heldWaits()) === 1, 'B holds the wait');
      const { response } = await A().send(to, `wake ${round}`);
      const acked = performance.now();
      assert.match(response, /^250/);
      const got = await held;
      assert.equal(got.status, 200);
      assert.equal(got.body.meta.waited, true);
      assert.deepEqual(got.body.data.map((e) => e.subject), [`wake ${round}`]);
      // bound: woken by the bus, not the 10 s deadline; one-sided, generous across three processes on a loaded machine
      assert.ok(got.at - acked < 3000, `B answered ${Math.round(got.at - acked)} ms after A's 250`);
      console.log(`# wait on B answered ${(got.at - acked).toFixed(1)} ms after A's 250`);
      await fetch(`${B().http}/api/v1/inboxes/${enc(to)}/emails`, { method: 'DELETE' });
    }
  });

  it("a key's per-minute limit holds across three nodes together", async () => {
    // three nodes of the same store in this process, on one clock the test owns: the burst in one
    // fresh minute window whatever the wall clock says (the spawned nodes above run on their own)
    const clock = movableClock();
    const inProcess = await Promise.all([0, 1, 2].map(() => startService(env, { clock, mounts: [] })));
    try {
      const res0 = await inProcess[0].api('/api/v1/keys', { method: 'POST' });
      assert.equal(res0.status, 201);
      const key = ((await res0.json()) as { data: { api_key: string } }).data.api_key;
      const headers = { authorization: `Bearer ${key}` };
      clock.freshMinute();
      const res = await Promise.all(Array.from({ length: PER_MINUTE + 15 }, (_, i) => inProcess[i % 3].api('/api/v1/domains', { headers })));
      const codes = res.map((r) => r.status);
      assert.equal(codes.filter((c) => c === 200).length, PER_MINUTE, `admitted: ${codes.join(',')}`);
      assert.equal(codes.filter((c) => c === 429).length, 15);
      const limited = res.find((r) => r.status === 429)!;
      assert.equal(((await limited.json()) as { error: { type: string } }).error.type, 'rate_limited');
      const retry = Number(limited.headers.get('retry-after'));
      assert.ok(retry >= 50 && retry <= 60, `retry-after until the fresh minute ends: ${retry}`);
      await Promise.all(res.map((r) => r.arrayBuffer().catch(() => undefined)));
      for (const node of inProcess) {
        const me = (await (await node.api('/api/v1/me', { headers })).json()) as { data: { usage: { requests_this_minute: number } } };
        assert.equal(me.data.usage.requests_this_minute, PER_MINUTE, 'every node reports the shared count');
      }
    } finally {
      await Promise.all(inProcess.map((n) => n.stop()));
    }
  });

  it('too_many_waiters counts the waits held on all nodes', async () => {
    const key = await mintKey(B());
    const aborts = nodes.map(() => new AbortController());
    const held = nodes.map((node, i) =>
      node.api(`/api/v1/inboxes/${enc(addr(`w${i}`))}/emails?wait=20`, { headers: { authorization: `Bearer ${key}` }, signal: aborts[i].signal }).catch(() => null));
    try {
      for (const node of nodes) await until(async () => (await node.heldWaits()) === 1, `${node.name} holds its wait (3 of 3 in all)`);
      for (const node of nodes) {
        const { status, body } = await list(node, addr('more'), '?wait=5', key);
        assert.equal(status, 429, `${node.name} refuses a fourth wait`);
        assert.equal(body.error?.type, 'too_many_waiters');
      }
    } finally {
      aborts.forEach((a) => a.abort());
      await Promise.all(held);
    }
    // the aborted waits give their slots back
    for (const node of nodes) await until(async () => (await node.heldWaits()) === 0, `${node.name} holds no wait`);
    // observed by asking (every 100 ms at most, as each try is a request of the key): the shared count follows
    await until(async () => (await list(A(), addr('again'), '?wait=1', key)).status === 200, 'slots are released when the waits end', 4000, 100);
  });

  it('ids from concurrent deliveries through all three nodes increase in the order they become visible', async () => {
    const boxes = [addr('ids0'), addr('ids1')];
    const PER_NODE = 12;
    const total = PER_NODE * 3;
    const seen = new Map<string, string[]>(boxes.map((b) => [b, []]));
    let sending = true;
    // one reader per inbox, advancing `since` to its last item, asking the nodes in turn
    const readers = boxes.map(async (box) => {
      let cursor = '00000000-0000-7000-8000-000000000000';
      const ids = seen.get(box)!;
      const deadline = Date.now() + 30_000;
      for (let i = 0; Date.now() < deadline; i++) {
        const { status, body } = await list(nodes[i % 3], box, `?since=${cursor}&limit=100`);
        assert.equal(status, 200);
        for (const e of body.data) {
          assert.ok(e.id > cursor, `${e.id} > ${cursor}`);
          ids.push(e.id);
          cursor = e.id;
        }
        if (!sending && ids.length >= total) break;
        await new Promise((r) => setTimeout(r, 5)); // poll: the reader asks again, the nodes in turn
      }
    });
    const acks = await Promise.all(nodes.flatMap((node) =>
      Array.from({ length: PER_NODE }, (_, i) => node.send(boxes, `${node.name}${i}`).then((r) => r.response))));
    sending = false;
    await Promise.all(readers);
    assert.ok(acks.every((r) => /^250/.test(r)));
    const everyId: string[] = [];
    for (const [box, ids] of seen) {
      assert.equal(ids.length, total, `${box}: the reader saw every email once (none skipped)`);
      assert.equal(new Set(ids).size, total);
      const { body } = await list(B(), box, '?limit=100');
      assert.deepEqual(body.data.map((e) => e.id), [...ids].reverse(), 'listing order is visibility order');
      everyId.push(...ids);
    }
    assert.equal(new Set(everyId).size, 2 * total, 'ids are unique across nodes and inboxes');
  });

  it('the operator CLI works on the shared store: a key revoked once is refused by every node', async () => {
    const key = await mintKey(A());
    const keyPrefix = key.slice(0, 12);
    const cli = (...args: string[]) => spawnSync(process.execPath, ['bin/ephemail.js', 'keys', ...args], {
      cwd: resolve(import.meta.dirname, '../..'), env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 30_000,
    });
    const listed = cli('list');
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`^${keyPrefix}\\t.*\\tactive$`, 'm'));
    assert.ok(!listed.stdout.includes(key), 'never prints a raw key');
    const revoked = cli('revoke', keyPrefix);
    assert.equal(revoked.status, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`revoked ${keyPrefix}`));
    for (const node of nodes) {
      const res = await node.api('/api/v1/me', { headers: { 'x-api-key': key } });
      assert.equal(res.status, 401, node.name);
      assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'unauthorized');
    }
  });

  it('every node is healthy and none crashed', async () => {
    for (const node of nodes) {
      assert.ok(node.alive());
      const res = await node.api('/api/v1/health');
      assert.equal(res.status, 200);
      assert.deepEqual(((await res.json()) as { data: unknown }).data, { status: 'ok', database: 'connected', smtp: 'running' });
    }
  });
});
