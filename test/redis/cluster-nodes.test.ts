// Two real `ephemail` processes on a 3-master Redis Cluster (redis+cluster://): the whole service on
// the Cluster key layout — mail through A listed and readable on B, a wait on B woken by A's mail
// through pub/sub, a key minted on one node valid on the other, per-inbox id order; and shared
// limits, counted by two nodes in this process on one clock the test moves to a fresh minute.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startService } from '../helpers/service.ts';
import { movableClock, until } from '../helpers/time.ts';
import { startNodes, type Node } from './nodes.ts';
import { SKIP_SERVER, startCluster, type RedisCluster, describeRedis } from './servers.ts';

const enc = encodeURIComponent;
const addr = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}@ephemail.test`;

describeRedis('two ephemail nodes on a 3-master Redis Cluster', { skip: SKIP_SERVER, concurrency: 1 }, () => {
  let cluster: RedisCluster;
  let a: Node;
  let b: Node;
  let env: Record<string, string>;

  before(async () => {
    cluster = await startCluster(3);
    env = { EPHEMAIL_STORE: cluster.url, EPHEMAIL_SESSION_SECRET: 'cluster-test-secret-of-at-least-32-bytes', EPHEMAIL_LIMIT_KEY_PER_MINUTE: '20', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000' };
    [a, b] = await startNodes(['A', 'B'], env);
  });
  after(async () => {
    const codes = await Promise.all([a?.stop(), b?.stop()]);
    await cluster?.stop();
    assert.deepEqual(codes, [0, 0]);
  });

  it('serves mail, waits, keys and id order across nodes on the Cluster', async () => {
    assert.equal((await b.api('/api/v1/health')).status, 200);

    const keyRes = await a.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(keyRes.status, 201);
    const key = ((await keyRes.json()) as { data: { api_key: string } }).data.api_key;
    const auth = { authorization: `Bearer ${key}` };

    // a wait on B wakes on mail delivered to A (to several inboxes, in different slots)
    const to = addr('c');
    const held = b.api(`/api/v1/inboxes/${enc(to)}/emails?wait=10`, { headers: auth }).then(async (r) => ({ body: (await r.json()) as { data: { id: string; subject: string }[]; meta: { waited: boolean } }, at: performance.now() }));
    await until(async () => (await b.heldWaits()) === 1, 'B holds the wait');
    const others = [addr('d'), addr('e'), addr('f')];
    assert.match((await a.send([to, ...others], 'on the cluster')).response, /^250/);
    const acked = performance.now();
    const got = await held;
    assert.deepEqual(got.body.data.map((e) => e.subject), ['on the cluster']);
    // bound: woken by the bus, not the 10 s deadline; one-sided, generous for a loaded machine
    assert.ok(got.at - acked < 5000, `woken ${Math.round(got.at - acked)} ms after the 250`);
    for (const box of others) {
      const list = (await (await b.api(`/api/v1/inboxes/${enc(box)}/emails`)).json()) as { data: { id: string }[] };
      assert.equal(list.data.length, 1, box);
      const full = await a.api(`/api/v1/emails/${list.data[0].id}`);
      assert.equal(full.status, 200, 'found by id alone (the slot is in the id)');
    }

    // concurrent deliveries through both nodes to one inbox: a since-reader sees every id once, in order
    const box = addr('order');
    await Promise.all([a, b].flatMap((n) => Array.from({ length: 8 }, (_, i) => n.send(box, `${n.name}${i}`))));
    const list = (await (await a.api(`/api/v1/inboxes/${enc(box)}/emails?since=00000000-0000-7000-8000-000000000000&limit=100`)).json()) as { data: { id: string }[] };
    assert.equal(list.data.length, 16);
    for (let i = 1; i < 16; i++) assert.ok(list.data[i].id > list.data[i - 1].id);

  });

  it("a key's per-minute limit is shared by the nodes on the Cluster", async () => {
    // two nodes of the Cluster store in this process, on one clock the test owns: the burst in one
    // fresh minute window whatever the wall clock says
    const clock = movableClock();
    const [p, q] = await Promise.all([0, 1].map(() => startService(env, { clock, mounts: [] })));
    try {
      // a key minted by a spawned node: valid on these too
      const keyRes = await a.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(keyRes.status, 201);
      const auth = { authorization: `Bearer ${((await keyRes.json()) as { data: { api_key: string } }).data.api_key}` };
      clock.freshMinute();
      const codes = (await Promise.all(Array.from({ length: 30 }, async (_, i) => {
        const r = await [p, q][i % 2].api('/api/v1/domains', { headers: auth });
        await r.arrayBuffer();
        return r.status;
      })));
      assert.equal(codes.filter((c) => c === 200).length, 20, `admitted exactly 20: ${codes.join(',')}`);
      assert.equal(codes.filter((c) => c === 429).length, 10);
    } finally {
      await Promise.all([p.stop(), q.stop()]);
    }
  });
});
