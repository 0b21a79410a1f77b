// Inbound caps for a public MX (EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE, _PER_ADDRESS_PER_MINUTE):
// off by default; past the cap a transaction gets 451 4.7.1 at MAIL FROM and a recipient 452 4.2.2
// at RCPT (temporary: the sender retries), and the retry after the minute is delivered. On Redis
// every node counts against the same window. Real SMTP sessions; the minute passes on a movable
// service clock, not in real time.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { captureLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';
import { movableMidMinuteClock } from '../helpers/time.ts';
import { SKIP_REDIS, TEST_REDIS_URL, countPrefix, dropPrefix, testStoreUrl } from '../redis/servers.ts';

const D = 'ephemail.test';
const addr = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}@${D}`;

async function session(port: number): Promise<SmtpClient> {
  const { client, greeting } = await SmtpClient.open(port);
  assert.equal(greeting.code, 220, greeting.text);
  assert.equal((await client.cmd('EHLO sender.example')).code, 250);
  return client;
}

/** One transaction on an open session: every reply, DATA only when a recipient was taken. */
async function transaction(client: SmtpClient, to: string[], subject = 'capped') {
  const mail = await client.cmd('MAIL FROM:<bulk@sender.example>');
  if (mail.code !== 250) return { mail, rcpt: [], data: null };
  const rcpt = [];
  for (const t of to) rcpt.push(await client.cmd(`RCPT TO:<${t}>`));
  let data = null;
  if (rcpt.some((r) => r.code === 250)) data = await client.data(toWire(message({ From: 'bulk@sender.example', Subject: subject }, 'x')));
  else await client.cmd('RSET');
  return { mail, rcpt, data };
}

async function count(svc: TestService, address: string): Promise<number> {
  const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: unknown[] }).data.length;
}

describe('SMTP inbound caps on one node', () => {
  test('off by default: 40 messages from one client to one address in a minute are all taken', async () => {
    const svc = await startService({}, { mounts: [], clock: movableMidMinuteClock() });
    try {
      const to = addr('uncapped');
      const client = await session(svc.smtpPort);
      for (let i = 0; i < 40; i++) {
        const t = await transaction(client, [to]);
        assert.equal(t.data?.code, 250, `message ${i + 1}: ${t.mail.text} ${t.rcpt[0]?.text}`);
      }
      await client.quit();
      assert.equal(await count(svc, to), 40);
    } finally {
      await svc.stop();
    }
  });

  test('per client IP: MAIL FROM past the cap gets 451 4.7.1; the retry after the minute is delivered', async () => {
    const clock = movableMidMinuteClock();
    const captured = captureLog('info');
    const svc = await startService({ EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '3' }, { mounts: [], clock, log: captured.log });
    try {
      const to = addr('ipcap');
      const client = await session(svc.smtpPort);
      for (let i = 0; i < 3; i++) assert.equal((await transaction(client, [to])).data?.code, 250);
      const over = await transaction(client, [to]);
      assert.equal(over.mail.code, 451, over.mail.text);
      assert.match(over.mail.text, /^4\.7\.1 Too much mail from your address: at most 3 messages a minute, try again in \d+ s$/);
      // a new connection is the same client
      const other = await session(svc.smtpPort);
      assert.equal((await other.cmd('MAIL FROM:<bulk@sender.example>')).code, 451);
      await other.quit();
      const deferred = captured.find('inbound cap reached');
      assert.ok(deferred.length >= 2);
      assert.equal(deferred[0].client, '127.0.0.1');
      assert.equal(deferred[0].cap, 'ip');

      clock.advance(60_000); // the sender retries after the minute
      const retry = await transaction(client, [to], 'the retry');
      assert.equal(retry.mail.code, 250, retry.mail.text);
      assert.equal(retry.data?.code, 250, retry.data?.text);
      await client.quit();
      assert.equal(await count(svc, to), 4);
      const metrics = await (await svc.api('/metrics')).text();
      assert.match(metrics, /^ephemail_smtp_capped_total\{cap="ip"\} 2$/m);
    } finally {
      await svc.stop();
    }
  });

  test('per recipient address: RCPT past the cap gets 452 4.2.2, other recipients of the message still get it; the retry after the minute is delivered', async () => {
    const clock = movableMidMinuteClock();
    const svc = await startService({ EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: '2' }, { mounts: [], clock });
    try {
      const hot = addr('hot');
      const cold = addr('cold');
      const client = await session(svc.smtpPort);
      for (let i = 0; i < 2; i++) assert.equal((await transaction(client, [hot])).data?.code, 250);
      const over = await transaction(client, [hot, cold]);
      assert.equal(over.mail.code, 250);
      assert.equal(over.rcpt[0].code, 452, over.rcpt[0].text);
      assert.match(over.rcpt[0].text, new RegExp(`^4\\.2\\.2 ${hot} is receiving too much mail: at most 2 messages a minute, try again in \\d+ s$`));
      assert.equal(over.rcpt[1].code, 250, 'another address is not held back');
      assert.equal(over.data?.code, 250);
      // spelled in capitals it is the same inbox, and the same bucket
      const shouted = await transaction(client, [hot.toUpperCase()]);
      assert.equal(shouted.rcpt[0].code, 452, shouted.rcpt[0].text);

      clock.advance(60_000);
      const retry = await transaction(client, [hot], 'the retry');
      assert.equal(retry.rcpt[0].code, 250, retry.rcpt[0].text);
      assert.equal(retry.data?.code, 250);
      await client.quit();
      assert.equal(await count(svc, hot), 3);
      assert.equal(await count(svc, cold), 1);
    } finally {
      await svc.stop();
    }
  });
});

describe('SMTP inbound caps across two nodes on one Redis', { skip: SKIP_REDIS }, () => {
  const prefix = `ephtest:smtpcaps:${randomUUID().slice(0, 8)}:`;
  const clock = movableMidMinuteClock();
  let a: TestService;
  let b: TestService;
  let redis: RedisClient;
  before(async () => {
    const env = {
      EPHEMAIL_STORE: testStoreUrl(prefix),
      EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '4',
      EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: '2',
    };
    [a, b] = await Promise.all([startService(env, { mounts: [], clock }), startService(env, { mounts: [], clock })]);
    redis = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(redis, 10_000);
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await dropPrefix(redis as never, prefix);
    await closeClient(redis);
  });

  test('the caps count on both nodes together: 452 and 451 on either node, both deliver after the minute; no day counters are kept', async () => {
    const to = addr('shared');
    const ca = await session(a.smtpPort);
    const cb = await session(b.smtpPort);
    assert.equal((await transaction(ca, [to])).data?.code, 250);
    assert.equal((await transaction(cb, [to])).data?.code, 250);
    // the address's cap (2) is used up on both nodes
    assert.equal((await transaction(ca, [to])).rcpt[0].code, 452);
    assert.equal((await transaction(cb, [to])).rcpt[0].code, 452);
    // four transactions from 127.0.0.1 so far: the client's cap (4) is used up on both nodes
    assert.equal((await transaction(ca, [addr('other')])).mail.code, 451);
    assert.equal((await transaction(cb, [addr('other')])).mail.code, 451);
    const keys = (await redis.keys(`${prefix}l:*`)) as string[];
    assert.ok(keys.some((k) => k.includes('smtp-rcpt:')) && keys.some((k) => k.includes('smtp-ip:')), keys.join(' '));
    assert.deepEqual(keys.filter((k) => /:d:\d+$/.test(k)), [], 'minute windows only');

    clock.advance(60_000);
    assert.equal((await transaction(cb, [to], 'retry on B')).data?.code, 250);
    assert.equal((await transaction(ca, [to], 'retry on A')).data?.code, 250);
    await ca.quit();
    await cb.quit();
    assert.equal(await count(a, to), 4);
    assert.ok((await countPrefix(redis as never, prefix)) > 0);
  });
});
