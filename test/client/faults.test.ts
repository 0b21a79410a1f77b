// @ephemail/client's inbox.faults: add (a key minted on first use), list, remove, clear, and a rule
// that nodemailer meets on the wire; a 2xx reply comes back as a typed invalid_request.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEphemail, EphemailError } from '@ephemail/client';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService({}, { mounts: [] });
});
after(() => svc.stop());

test('inbox.faults: add, list, remove, clear; the rule answers SMTP; a 2xx reply is a typed 400', async () => {
  const mail = createEphemail({ baseUrl: svc.http });
  const inbox = await mail.createInbox();
  const rule = await inbox.faults.add({ stage: 'rcpt', reply: '451 4.7.1 Try again later', times: 1 });
  assert.match(mail.apiKey ?? '', /^eph_/, 'a key was minted for it');
  assert.equal(rule.remaining, 1);
  await assert.rejects(svc.send({ to: inbox.address, subject: 'first', text: 'x' }), (e: any) => e.response === '451 4.7.1 Try again later');
  await svc.send({ to: inbox.address, subject: 'second', text: 'x' });
  assert.equal((await inbox.waitForEmail({ subject: 'second', timeoutMs: 5000 })).subject, 'second');
  const delayed = await inbox.faults.add({ stage: 'data', delay_seconds: 30 });
  assert.deepEqual((await inbox.faults.list()).map((r) => [r.id, r.remaining]), [[rule.id, 0], [delayed.id, null]]);
  await inbox.faults.remove(rule.id);
  assert.deepEqual((await inbox.faults.list()).map((r) => r.id), [delayed.id]);
  assert.equal(await inbox.faults.clear(), 1);
  await assert.rejects(inbox.faults.add({ stage: 'rcpt', reply: '250 2.0.0 Ok' }), (e: unknown) => e instanceof EphemailError && e.type === 'invalid_request' && e.status === 400);
});
