// Push across nodes on one Redis: three real `ephemail` processes. A stream resumed
// on another node with Last-Event-ID gets each email exactly once; webhook events from mail received
// by any node are delivered once across the nodes (never once per node), with retries and valid
// signatures; a node killed in the middle of a delivery does not lose it (the next node, built in this
// process, has its clock moved past the dead node's lease instead of waiting the lease out).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { LEASE_MS } from '../../src/services/webhooks.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { openStream } from '../helpers/sse.ts';
import { movableClock } from '../helpers/time.ts';
import { startNode, startNodes, type Node } from './nodes.ts';
import { SKIP_REDIS, TEST_REDIS_URL, countPrefix, dropPrefix, describeRedis, testStoreUrl } from './servers.ts';

const prefix = `ephtest:push:${randomUUID().slice(0, 8)}:`;
const enc = encodeURIComponent;
const json = { 'content-type': 'application/json' };

function envFor(p: string): Record<string, string> {
  return {
    EPHEMAIL_STORE: testStoreUrl(p),
    EPHEMAIL_SESSION_SECRET: 'push-nodes-test-secret-of-at-least-32-bytes',
    EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true',
    EPHEMAIL_WEBHOOK_WILDCARD: 'true', // the webhook test watches *@ephemail.test
    EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '20',
  };
}

async function mintKey(node: Node): Promise<string> {
  const res = await node.api('/api/v1/keys', { method: 'POST' });
  assert.equal(res.status, 201);
  return ((await res.json()) as { data: { api_key: string } }).data.api_key;
}

describeRedis('push across three nodes on one Redis', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  let nodes: Node[] = [];
  let redis: RedisClient;
  const extra = `${prefix}solo:`;

  before(async () => {
    redis = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(redis, 10_000);
    nodes = await startNodes(['A', 'B', 'C'], envFor(prefix));
  });
  after(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await dropPrefix(redis as never, prefix);
    assert.equal(await countPrefix(redis as never, prefix), 0);
    await closeClient(redis);
  });

  it('a stream on B sees mail received by A; resumed on C with Last-Event-ID after mail arrived through all three, each email exactly once', async () => {
    const [A, B, C] = nodes;
    const key = await mintKey(A);
    const auth = { authorization: `Bearer ${key}` };
    const address = `resume-${randomUUID().slice(0, 8)}@ephemail.test`;
    const url = (node: Node) => `${node.http}/api/v1/inboxes/${enc(address)}/events`;
    const s1 = await openStream(url(B), auth);
    await s1.live(); // the opening comment: from here on no mail is missed
    await A.send(address, 'm1');
    const [e1] = await s1.until(1);
    assert.equal(JSON.parse(e1.data!).subject, 'm1');
    await s1.close();
    for (const [node, subject] of [[A, 'm2'], [B, 'm3'], [C, 'm4']] as const) await node.send(address, subject); // the gap
    const s2 = await openStream(url(C), { ...auth, 'last-event-id': e1.id! });
    await s2.until(3, 10_000);
    await B.send(address, 'm5');
    await s2.until(4, 10_000);
    await new Promise((r) => setTimeout(r, 500)); // quiet window: a duplicate at the seam would arrive in these 500 ms
    await s2.close();
    const data = s2.events.map((e) => JSON.parse(e.data!));
    assert.deepEqual(data.map((d) => d.subject), ['m2', 'm3', 'm4', 'm5'], 'no gap, no duplicate at the seam');
    assert.deepEqual(s2.events.map((e) => e.id), data.map((d) => d.id));
  });

  it('webhook events of mail received by every node are delivered once across the nodes, retried, and verify', async () => {
    const [A, B, C] = nodes;
    const seen = new Map<string, number>();
    // the first two calls of each email fail: every event needs two retries, on whichever nodes claim them
    const rx = await startReceiver((_n, call) => {
      const id = JSON.parse(call.body).data.id as string;
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      return n <= 2 ? 500 : 200;
    });
    try {
      const key = await mintKey(B);
      const domain = 'ephemail.test';
      const res = await C.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url: rx.url, address: `*@${domain}` }) });
      assert.equal(res.status, 201);
      const hook = ((await res.json()) as { data: { id: string; secret: string } }).data;
      const N = 30;
      const sent: string[] = [];
      await Promise.all(Array.from({ length: N }, async (_, i) => {
        const subject = `hook ${i}`;
        sent.push(subject);
        await nodes[i % 3].send(`h${i}-${randomUUID().slice(0, 6)}@${domain}`, subject);
      }));
      await rx.until(3 * N, 30_000);
      await new Promise((r) => setTimeout(r, 2500)); // quiet window: a duplicate delivery would show up by now
      assert.equal(rx.calls.length, 3 * N, 'three calls per email: two failed ones and the third, never more');
      const wh = new Webhook(hook.secret);
      const byEvent = new Map<string, string[]>();
      for (const c of rx.calls) {
        const ev = wh.verify(c.body, c.headers as Record<string, string>) as { data: { subject: string } };
        const id = String(c.headers['webhook-id']);
        byEvent.set(id, [...(byEvent.get(id) ?? []), ev.data.subject]);
      }
      assert.equal(byEvent.size, N, 'one event per email');
      assert.deepEqual([...byEvent.values()].map((s) => s[0]).sort(), [...sent].sort());
      for (const subjects of byEvent.values()) assert.equal(subjects.length, 3);
      const log = (await (await A.api(`/api/v1/webhooks/${hook.id}/deliveries?limit=100`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { status: string }[]; meta: { pending: number } };
      assert.equal(log.data.filter((d) => d.status === 'delivered').length, N);
      assert.equal(log.data.filter((d) => d.status === 'retrying').length, 2 * N);
      assert.equal(log.meta.pending, 0);
    } finally {
      await rx.close();
    }
  });

  it('a node on Redis without EPHEMAIL_WEBHOOK_ALLOW_PRIVATE refuses metadata and private receivers at registration', async () => {
    const env = envFor(`${prefix}guard:`);
    delete env.EPHEMAIL_WEBHOOK_ALLOW_PRIVATE;
    const node = await startNode('G', env);
    try {
      const key = await mintKey(node);
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/']) {
        const res = await node.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url, address: 'x@ephemail.test' }) });
        assert.equal(res.status, 400);
        const body = (await res.json()) as { error: { type: string; message: string } };
        assert.equal(body.error.type, 'invalid_request');
        assert.match(body.error.message, /not a public address/);
      }
      assert.deepEqual(((await (await node.api('/api/v1/webhooks', { headers: { authorization: `Bearer ${key}` } })).json()) as { data: unknown[] }).data, []);
    } finally {
      await node.stop();
    }
  });

  it('a node killed in the middle of a delivery does not lose it: another node delivers it when the lease ends', { timeout: 60_000 }, async () => {
    // one node alone on its own prefix holds the delivery (the receiver never answers), then dies
    let hang = true;
    const rx = await startReceiver(() => (hang ? 0 : 200));
    const solo = await startNode('D', envFor(extra));
    let next: TestService | null = null;
    try {
      const key = await mintKey(solo);
      const address = `killed-${randomUUID().slice(0, 8)}@ephemail.test`;
      const res = await solo.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url: rx.url, address }) });
      assert.equal(res.status, 201);
      await solo.send(address, 'delivered after a crash');
      await rx.until(1);
      await solo.kill(); // dies holding the lease, mid-request
      hang = false;
      // the next node's time is past the lease D took (claimed with D's clock, the real one): no wait
      const clock = movableClock();
      clock.advance(LEASE_MS);
      next = await startService(envFor(extra), { clock, mounts: [] });
      const calls = await rx.until(2, 10_000);
      assert.equal(calls[0].headers['webhook-id'], calls[1].headers['webhook-id'], 'the same event, redelivered');
      assert.equal(JSON.parse(calls[1].body).data.subject, 'delivered after a crash');
    } finally {
      await solo.kill();
      if (next) await next.stop();
      await rx.close();
    }
  });
});
