// SMTP faults across two real `ephemail` processes on one Redis: a rule created through node A
// answers SMTP on node B at once, `times` counts the transactions of both nodes together (parallel
// senders on both use a limited rule exactly that many times), and a data rule made on B refuses a
// transaction received by A. Clients: nodemailer (Node.send) and the raw client.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { startNodes, type Node } from './nodes.ts';
import { SKIP_REDIS, TEST_REDIS_URL, countPrefix, describeRedis, dropPrefix, testStoreUrl } from './servers.ts';

const prefix = `ephtest:faults:${randomUUID().slice(0, 8)}:`;
const enc = encodeURIComponent;
const json = { 'content-type': 'application/json' };

describeRedis('SMTP faults on two nodes of one Redis', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  let A: Node;
  let B: Node;
  let redis: RedisClient;
  let key: string;
  before(async () => {
    redis = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(redis, 10_000);
    const env = {
      EPHEMAIL_STORE: testStoreUrl(prefix),
      EPHEMAIL_SESSION_SECRET: 'faults-nodes-test-secret-of-at-least-32-bytes',
      EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '20',
    };
    [A, B] = await startNodes(['A', 'B'], env);
    key = (await (await A.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(async () => {
    await Promise.all([A?.stop(), B?.stop()]);
    await dropPrefix(redis as never, prefix);
    assert.equal(await countPrefix(redis as never, prefix), 0);
    await closeClient(redis);
  });
  const add = (node: Node, address: string, body: unknown) =>
    node.api(`/api/v1/inboxes/${enc(address)}/faults`, { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  const count = async (node: Node, address: string) => (await (await node.api(`/api/v1/inboxes/${enc(address)}/emails`)).json()).meta.count as number;
  const rcpt = async (node: Node, to: string) => (await sendRaw(node.smtpPort, { from: 's@example.org', to: [to], body: message({ Subject: 'x' }, 'x') })).rcpt[0];

  it('a rule created on A applies to SMTP on B at once; times counts across both nodes', async () => {
    const to = 'shared@ephemail.test';
    assert.equal((await add(A, to, { stage: 'rcpt', reply: '451 4.7.1 Greylisted on every node', times: 3 })).status, 201);
    await assert.rejects(B.send(to, 'first'), (err: any) => err.response === '451 4.7.1 Greylisted on every node');
    const second = await rcpt(A, to);
    assert.equal(second.code, 451);
    assert.equal(second.text, '4.7.1 Greylisted on every node');
    await assert.rejects(B.send(to, 'third'), (err: any) => err.responseCode === 451);
    assert.match((await A.send(to, 'fourth')).response, /^250 /, 'the fourth attempt (on A) gets through');
    assert.equal(await count(B, to), 1);
    const listed = (await (await B.api(`/api/v1/inboxes/${enc(to)}/faults`, { headers: { authorization: `Bearer ${key}` } })).json()).data;
    assert.equal(listed[0].remaining, 0);
  });

  it('parallel senders on both nodes use a limited rule exactly `times` times', async () => {
    const to = 'race@ephemail.test';
    await add(B, to, { stage: 'rcpt', reply: '450 4.2.1 Mailbox busy', times: 6 });
    const codes = (await Promise.all(Array.from({ length: 16 }, (_, i) => rcpt(i % 2 ? A : B, to)))).map((r) => r.code);
    assert.equal(codes.filter((c) => c === 450).length, 6, codes.join(','));
    assert.equal(codes.filter((c) => c === 250).length, 10);
  });

  it('a data rule made on B refuses a whole transaction received by A, once', async () => {
    const to = 'datanode@ephemail.test';
    await add(B, to, { stage: 'data', reply: '552 5.2.2 Mailbox full', times: 1 });
    const r = await sendRaw(A.smtpPort, { from: 's@example.org', to: ['cc-node@ephemail.test', to], body: message({ Subject: 'x' }, 'x') });
    assert.deepEqual(r.rcpt.map((x) => x.code), [250, 250]);
    assert.equal(r.data?.code, 552);
    assert.equal(r.data?.text, '5.2.2 Mailbox full');
    assert.equal(await count(B, 'cc-node@ephemail.test'), 0);
    assert.match((await A.send([to, 'cc-node@ephemail.test'], 'again')).response, /^250 /);
    assert.equal(await count(B, to), 1);
  });
});
