// The shared budget for DATA held in memory (EPHEMAIL_MAX_INFLIGHT_BYTES): a message that would push
// all sessions together over it is refused with a temporary 452 and nothing stored; once memory is
// free again the same message is accepted.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_MAX_INFLIGHT_BYTES: String(2 * 1024 * 1024), EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' });
});
after(() => svc.stop());

const big = (to: string, subject: string) => toWire(message({ From: 'a@example.org', To: to, Subject: subject }, `${'x'.repeat(76)}\n`.repeat(16_000)));

async function openTransaction(to: string): Promise<SmtpClient> {
  const { client } = await SmtpClient.open(svc.smtpPort);
  assert.equal((await client.cmd('EHLO budget.test')).code, 250);
  assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
  assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
  return client;
}

const count = async (address: string) => ((await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: unknown[] }).data.length;

test('DATA over the shared in-flight budget gets 452 4.3.1, nothing stored, and succeeds once memory is free', async () => {
  const holder = await openTransaction('holder@ephemail.test');
  const second = await openTransaction('second@ephemail.test');
  try {
    // the first sender streams 1.2 MB and pauses before the final dot: its bytes stay held
    const first = big('holder@ephemail.test', 'held');
    assert.equal((await holder.cmd('DATA')).code, 354);
    holder.write(first);
    // unobservable: nothing outside the SMTP listener shows its in-flight bytes yet; the 1.2 MB are read by then
    await new Promise((r) => setTimeout(r, 300));

    const refused = await second.data(big('second@ephemail.test', 'refused'));
    assert.equal(refused.code, 452, refused.text);
    assert.match(refused.text, /^4\.3\.1 /);
    assert.equal(await count('second@ephemail.test'), 0);

    holder.write('.\r\n');
    const held = await holder.read(30_000);
    assert.equal(held.code, 250, held.text);

    // the session goes on: the same message now fits
    assert.equal((await second.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await second.cmd('RCPT TO:<second@ephemail.test>')).code, 250);
    const retried = await second.data(big('second@ephemail.test', 'retried'));
    assert.equal(retried.code, 250, retried.text);
    assert.equal(await count('second@ephemail.test'), 1);
    assert.equal(await count('holder@ephemail.test'), 1);
  } finally {
    await holder.quit();
    await second.quit();
  }
});
