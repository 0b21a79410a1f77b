// Webhook deliveries are fair across keys (docs/push.md "Fairness", issue 23 finding 6): one key's
// receiver that never answers may hold at most a quarter of a node's delivery slots, so another key's
// event goes out at once instead of waiting behind the first key's backlog (it waited 90.8 s in the
// review: the queue was first come, first served, and every slot sat on the slow receiver's timeout).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';

let svc: TestService;
let stuck: Receiver;
let fine: Receiver;
before(async () => {
  // 8 delivery slots on the node: a key's share is 2
  svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_WEBHOOK_MAX_IN_FLIGHT: '8' });
  stuck = await startReceiver(() => 0); // never answers: each delivery holds its slot for the 10 s timeout
  fine = await startReceiver();
});
after(async () => {
  await svc.stop();
  await stuck.close();
  await fine.close();
});

async function mintKey(): Promise<string> {
  const res = await svc.api('/api/v1/keys', { method: 'POST' });
  assert.equal(res.status, 201);
  return (await res.json()).data.api_key;
}
async function register(key: string, url: string, address: string): Promise<void> {
  const res = await svc.api('/api/v1/webhooks', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ url, address }) });
  assert.equal(res.status, 201, await res.text());
}

test('a key whose receiver hangs holds at most its share of the slots: another key\'s event is delivered at once', { timeout: 60_000 }, async () => {
  const slowKey = await mintKey();
  const otherKey = await mintKey();
  await register(slowKey, stuck.url, 'hang@ephemail.test');
  await register(otherKey, fine.url, 'prompt@ephemail.test');
  const { client } = await SmtpClient.open(svc.smtpPort);
  try {
    await client.cmd('EHLO test.example');
    const send = async (to: string, subject: string) => {
      assert.equal((await client.cmd('MAIL FROM:<a@sender.example>')).code, 250);
      assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
      assert.equal((await client.data(toWire(message({ From: 'a@sender.example', Subject: subject }, 'x')))).code, 250);
    };
    // 30 events for the hanging receiver first: with a first-come queue they would take all 8 slots
    for (let i = 0; i < 30; i++) await send('hang@ephemail.test', `slow ${i}`);
    await stuck.until(2, 10_000); // its deliveries are running (and hanging)
    const sent = performance.now();
    await send('prompt@ephemail.test', 'prompt');
    const [call] = await fine.until(1, 3000);
    const ms = performance.now() - sent;
    assert.equal(JSON.parse(call.body).data.subject, 'prompt');
    // bound: delivered promptly despite the hanging receiver (it would wait for a slot otherwise); one-sided
    assert.ok(ms < 3000, `delivered ${ms.toFixed(0)} ms after its 250`);
    assert.equal(stuck.calls.length, 2, 'the hanging receiver holds two deliveries (its key\'s share of 8), not every slot');
  } finally {
    await client.quit();
  }
});
