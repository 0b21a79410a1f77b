// Redis goes away under traffic and comes back. A private redis-server (AOF, appendfsync always, in a
// temp dir) is SIGKILLed while a node takes mail and API calls: the node does not crash, answers
// health 503 `database: "disconnected"`, API 500 `internal_error` with retry-after, SMTP 451; when
// Redis restarts from its AOF the node serves again with no restart and every email that got a 250
// is there.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { until } from '../helpers/time.ts';
import { startNode, startNodes, type Node } from './nodes.ts';
import { SKIP_SERVER, startRedis, type RedisProcess, describeRedis } from './servers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeRedis('Redis fault: stop under traffic, come back', { skip: SKIP_SERVER, concurrency: 1 }, () => {
  let redis: RedisProcess;
  let node: Node;
  let other: Node;
  const to = `fault-${randomUUID().slice(0, 8)}@ephemail.test`;
  const acked = new Set<string>();
  const refused: { subject: string; code: number | undefined }[] = [];
  const apiStatuses: number[] = [];
  let running = true;
  let traffic: Promise<void>;

  before(async () => {
    redis = await startRedis({ appendfsync: 'always' });
    const env = { EPHEMAIL_STORE: redis.url, EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' };
    [node, other] = await startNodes(['F', 'G'], env);
    // traffic: two SMTP senders and one API reader, until told to stop (bounded)
    const sender = async (n: number) => {
      for (let i = 0; running && i < 5000; i++) {
        const subject = `s${n}-${i}`;
        try {
          const { response } = await node.send(to, subject);
          if (/^250/.test(response)) acked.add(subject);
        } catch (err) {
          refused.push({ subject, code: (err as { responseCode?: number }).responseCode });
          await sleep(50); // slow on purpose: a refused sender backs off before it tries again
        }
      }
    };
    const reader = async () => {
      for (let i = 0; running && i < 20_000; i++) {
        const res = await node.api(`/api/v1/inboxes/${encodeURIComponent(to)}/emails?limit=1`).catch(() => null);
        apiStatuses.push(res?.status ?? 0);
        await res?.arrayBuffer();
        await sleep(20); // slow on purpose: the reader's pace, about 50 reads a second
      }
    };
    traffic = Promise.all([sender(1), sender(2), reader()]).then(() => undefined);
  });

  after(async () => {
    running = false;
    await traffic;
    const codes = await Promise.all([node?.stop(), other?.stop()]);
    await redis?.stop();
    assert.deepEqual(codes, [0, 0], 'the nodes exit cleanly');
  });

  it('serves, then reports the outage with the documented codes, then recovers by itself', async () => {
    await until(() => acked.size >= 10, 'mail flows before the fault', 10_000);

    await redis.kill();
    const ackedBefore = acked.size;
    let health!: Response;
    await until(async () => (health = await node.api('/api/v1/health')).status === 503, 'the node reports the outage', 10_000);
    assert.deepEqual(((await health.json()) as { data: unknown }).data, { status: 'degraded', database: 'disconnected', smtp: 'running' });

    const list = await node.api(`/api/v1/inboxes/${encodeURIComponent(to)}/emails`);
    assert.equal(list.status, 500);
    assert.equal(((await list.json()) as { error: { type: string } }).error.type, 'internal_error');
    assert.ok(Number(list.headers.get('retry-after')) >= 1, 'retry-after on the 500');
    const key = await node.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(key.status, 500);

    await assert.rejects(node.send(to, 'during outage'), (err: { responseCode?: number }) => err.responseCode === 451);
    assert.ok(refused.length > 0 && refused.every((r) => r.code === 451), `every refusal is 451: ${JSON.stringify(refused.slice(0, 3))}`);
    assert.ok(acked.size <= ackedBefore + 2, 'no 250 while Redis is down (at most the ones already stored)');
    assert.ok(node.alive(), 'no crash');

    await sleep(500); // slow on purpose: the outage lasts on (the node's reconnect attempts keep failing) before Redis returns
    await redis.start(); // same port, same dir: Redis replays its AOF
    await until(async () => (await node.api('/api/v1/health')).status === 200, 'healthy again with no restart', 10_000, 100);
    const refusedAtRecovery = refused.length;
    const ackedAtRecovery = acked.size;
    await until(() => acked.size >= ackedAtRecovery + 10, 'mail flows again', 10_000);
    assert.ok(refused.length <= refusedAtRecovery + 2, 'no more refusals once recovered');
    assert.equal(apiStatuses.at(-1), 200, 'the API serves again');

    running = false;
    await traffic;
    const stored = new Set<string>();
    let before = '';
    for (let page = 0; page < 100; page++) {
      const res = await node.api(`/api/v1/inboxes/${encodeURIComponent(to)}/emails?limit=100${before ? `&before=${before}` : ''}`);
      assert.equal(res.status, 200);
      const body = (await res.json()) as { data: { subject: string }[]; meta: { next_before: string | null } };
      for (const e of body.data) stored.add(e.subject);
      if (!body.meta.next_before) break;
      before = body.meta.next_before;
    }
    const missing = [...acked].filter((s) => !stored.has(s));
    assert.deepEqual(missing, [], `every 250-acknowledged email survived (${acked.size} acknowledged)`);
    assert.ok(apiStatuses.every((s) => s === 200 || s === 500), `API answered 200 or 500 only: ${[...new Set(apiStatuses)]}`);
    assert.ok(node.logs.some((l) => l.msg === 'redis connection restored'), 'the node logged its recovery');

    // the other node's bus subscription came back too: a wait held on G wakes on mail through F
    const keyRes = await node.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(keyRes.status, 201);
    const apiKey = ((await keyRes.json()) as { data: { api_key: string } }).data.api_key;
    const box = `after-${randomUUID().slice(0, 8)}@ephemail.test`;
    const held = other.api(`/api/v1/inboxes/${encodeURIComponent(box)}/emails?wait=10`, { headers: { 'x-api-key': apiKey } }).then(async (r) => ({ status: r.status, body: (await r.json()) as { data: { subject: string }[] }, at: performance.now() }));
    await until(async () => (await other.heldWaits()) === 1, 'G holds the wait');
    await node.send(box, 'wake after outage');
    const sentAt = performance.now();
    const woke = await held;
    assert.equal(woke.status, 200);
    assert.deepEqual(woke.body.data.map((e) => e.subject), ['wake after outage']);
    // bound: woken by the bus, not the 10 s deadline; one-sided, generous for a loaded machine
    assert.ok(woke.at - sentAt < 5000, `woken by the bus (${Math.round(woke.at - sentAt)} ms), not by the deadline`);
    assert.ok(other.alive());
  });
});

describeRedis('Redis not there at start-up', { skip: SKIP_SERVER }, () => {
  it('the node starts degraded and becomes healthy when Redis appears, with no restart', async () => {
    const redis = await startRedis();
    await redis.kill(); // a free port, a dir: Redis comes later
    const node = await startNode('late', { EPHEMAIL_STORE: redis.url });
    try {
      const health = await node.api('/api/v1/health');
      assert.equal(health.status, 503);
      assert.equal(((await health.json()) as { data: { database: string } }).data.database, 'disconnected');
      await assert.rejects(node.send(`late@ephemail.test`, 'too early'), (err: { responseCode?: number }) => err.responseCode === 451);
      await redis.start();
      await until(async () => (await node.api('/api/v1/health')).status === 200, 'healthy once Redis appears', 10_000, 100);
      assert.match((await node.send('late@ephemail.test', 'on time')).response, /^250/);
      const list = await node.api('/api/v1/inboxes/late%40ephemail.test/emails');
      assert.deepEqual(((await list.json()) as { data: { subject: string }[] }).data.map((e) => e.subject), ['on time']);
    } finally {
      assert.equal(await node.stop(), 0);
      await redis.stop();
    }
  });
});
