// The budget for DATA held in memory (EPHEMAIL_MAX_INFLIGHT_BYTES): a message that would push all
// sessions together over it, or its client (an IPv4 address, an IPv6 /64) over a quarter of it, is
// refused with a temporary 452 and nothing stored; once memory is free again the same message is
// accepted. A session whose DATA stalls below the minimum rate is closed with 421 and what it held
// is free at once. Real sockets; other clients are other loopback addresses (127.0.0.2, ...).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { CLIENT_SHARE_OF_INFLIGHT, createSmtpReceiver, DEFAULT_SMTP_LIMITS } from '../../src/smtp/server.ts';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';
import { startService, type TestService } from '../helpers/service.ts';

const BUDGET = 2 * 1024 * 1024;
let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_MAX_INFLIGHT_BYTES: String(BUDGET), EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' });
});
after(() => svc.stop());

/** A message of about `bytes` bytes (77-byte lines). */
const sized = (to: string, subject: string, bytes: number) => toWire(message({ From: 'a@example.org', To: to, Subject: subject }, `${'x'.repeat(76)}\n`.repeat(Math.ceil(bytes / 78))));

async function openTransaction(to: string, from = '127.0.0.1', port = svc.smtpPort): Promise<SmtpClient> {
  const { client } = await SmtpClient.open(port, '127.0.0.1', from);
  assert.equal((await client.cmd('EHLO budget.test')).code, 250);
  assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
  assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
  return client;
}

/** Starts DATA and sends `body` without the final dot: the session then holds what it sent. */
async function stall(client: SmtpClient, body: Buffer): Promise<void> {
  assert.equal((await client.cmd('DATA')).code, 354);
  client.write(body);
}

const count = async (address: string) => ((await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: unknown[] }).data.length;
// unobservable: nothing outside the SMTP listener shows its in-flight bytes yet; what a stalled session sent is read by then
const settle = () => new Promise((r) => setTimeout(r, 300));

test('a client holds at most a quarter of the budget; the minimum DATA rate is 500 bytes/s over 30 s windows', () => {
  assert.equal(CLIENT_SHARE_OF_INFLIGHT, 1 / 4);
  assert.equal(DEFAULT_SMTP_LIMITS.dataRateMinBytes, 15_000);
  assert.equal(DEFAULT_SMTP_LIMITS.dataRateWindowMs, 30_000);
});

test('DATA over the shared in-flight budget gets 452 4.3.1, nothing stored, and succeeds once memory is free', async () => {
  // four clients each hold just under their quarter: together the budget is all but full
  const holders = await Promise.all([1, 2, 3, 4].map((n) => openTransaction(`holder${n}@ephemail.test`, `127.0.0.${n}`)));
  const fifth = await openTransaction('fifth@ephemail.test', '127.0.0.5');
  try {
    for (const [i, h] of holders.entries()) await stall(h, sized(`holder${i + 1}@ephemail.test`, 'held', 500_000));
    await settle();

    const refused = await fifth.data(sized('fifth@ephemail.test', 'refused', 200_000));
    assert.equal(refused.code, 452, refused.text);
    assert.match(refused.text, /^4\.3\.1 /);
    assert.doesNotMatch(refused.text, /your address/, 'the fifth client is under its own share: the budget itself is full');
    assert.equal(await count('fifth@ephemail.test'), 0);

    holders[0].write('.\r\n');
    const held = await holders[0].read(30_000);
    assert.equal(held.code, 250, held.text);

    // the session goes on: the same message now fits
    assert.equal((await fifth.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await fifth.cmd('RCPT TO:<fifth@ephemail.test>')).code, 250);
    const retried = await fifth.data(sized('fifth@ephemail.test', 'retried', 200_000));
    assert.equal(retried.code, 250, retried.text);
    assert.equal(await count('fifth@ephemail.test'), 1);
    // the other holders were within the budget all along: their messages are stored too
    for (const h of holders.slice(1)) {
      h.write('.\r\n');
      const r = await h.read(30_000);
      assert.equal(r.code, 250, r.text);
    }
    for (const n of [1, 2, 3, 4]) assert.equal(await count(`holder${n}@ephemail.test`), 1);
    for (const c of [...holders, fifth]) await c.quit();
  } finally {
    for (const c of [...holders, fifth]) c.socket.destroy(); // (a failed assertion leaves sessions in DATA)
  }
});

test('one IP\'s stalled sessions cannot fill the budget: another IP\'s message gets 250 (issue 35, finding 1)', async () => {
  // five sessions from 127.0.0.1 each try to hold 450 KB: without a share they fill the 2 MiB budget
  const stalled = await Promise.all([1, 2, 3, 4, 5].map((n) => openTransaction(`stall${n}@ephemail.test`)));
  const other = await openTransaction('other@ephemail.test', '127.0.0.2');
  try {
    for (const [i, c] of stalled.entries()) await stall(c, sized(`stall${i + 1}@ephemail.test`, 'stalled', 450_000));
    await settle();

    const r = await other.data(sized('other@ephemail.test', 'from another client', 400_000));
    assert.equal(r.code, 250, r.text);
    assert.equal(await count('other@ephemail.test'), 1);

    // the first stalled session fits its client's share and is stored; the others went over it
    const replies = [];
    for (const c of stalled) {
      c.write('.\r\n');
      replies.push(await c.read(30_000));
    }
    assert.equal(replies[0].code, 250, replies[0].text);
    for (const r2 of replies.slice(1)) {
      assert.equal(r2.code, 452, r2.text);
      assert.match(r2.text, /^4\.3\.1 .*from your address/);
    }
    assert.equal(await count('stall1@ephemail.test'), 1);
    assert.equal(await count('stall2@ephemail.test'), 0);
    for (const c of [...stalled, other]) await c.quit();
  } finally {
    for (const c of [...stalled, other]) c.socket.destroy(); // (a failed assertion leaves sessions in DATA)
  }
});

test('DATA below the minimum rate gets 421 4.4.2 and is closed, and its share is free at once', async () => {
  // the same service's receiver with a short window: at least 10,000 bytes every 500 ms
  const rx = createSmtpReceiver(svc.service.core, { dataRateMinBytes: 10_000, dataRateWindowMs: 500 });
  const port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
  try {
    // a session that holds its whole share and then trickles a byte now and then
    const slow = await openTransaction('slow@ephemail.test', '127.0.0.3', port);
    await stall(slow, sized('slow@ephemail.test', 'slow', 500_000));
    const trickle = setInterval(() => slow.write('x'), 100);
    try {
      const t0 = performance.now();
      const kicked = await slow.read(10_000);
      assert.equal(kicked.code, 421, kicked.text);
      assert.match(kicked.text, /^4\.4\.2 DATA too slow/);
      // bound: within two windows of the stall (a loaded machine only makes it later)
      assert.ok(performance.now() - t0 < 5_000);
      const closed = await slow.read(5_000);
      assert.equal(closed.code, 0, 'the connection is closed');
    } finally {
      clearInterval(trickle);
      await slow.quit();
    }
    // the same client's next message needs that share: it is free
    const again = await openTransaction('slow@ephemail.test', '127.0.0.3', port);
    const r = await again.data(sized('slow@ephemail.test', 'in time', 500_000));
    assert.equal(r.code, 250, r.text);
    await again.quit();
    assert.equal(await count('slow@ephemail.test'), 1);
  } finally {
    await rx.close();
  }
});
