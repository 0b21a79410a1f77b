// @ephemail/client against a real service: the helpers a sign-up test uses, over real SMTP and
// HTTP; and its generated types match the live OpenAPI document (drift fails the build).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { createEphemail, EphemailError, EphemailTimeoutError } from '@ephemail/client';
import { generateTypes, SCHEMA_FILE } from '../../packages/client/scripts/types.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { metric } from '../helpers/metrics.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  svc = await startService({}, { mounts: [] });
});
after(() => svc.stop());

test('the checked-in types are what the live OpenAPI document generates (run `npm run gen` after an API or view change)', async () => {
  assert.equal(readFileSync(SCHEMA_FILE, 'utf8'), await generateTypes());
});

test('createInbox → waitForCode / waitForLink / waitForEmail, with a key minted on the first wait', async () => {
  const mail = createEphemail({ baseUrl: svc.http });
  const inbox = await mail.createInbox();
  assert.match(inbox.address, /@ephemail\.test$/);
  const code = inbox.waitForCode({ subject: 'verify', timeoutMs: 20_000 });
  await until(async () => (await metric(svc.http, 'ephemail_waits_held')) === 1, 'the client holds its wait');
  await svc.send({ to: inbox.address, subject: 'Weekly news', text: 'nothing to see' });
  await svc.send({ to: inbox.address, subject: 'Please verify your email', text: 'Your verification code is 559 120.', html: '<p>Your verification code is <b>559 120</b>.</p><p><a href="https://app.example/verify?t=9">Verify email</a></p>' });
  assert.equal(await code, '559120');
  assert.match(mail.apiKey ?? '', /^eph_/, 'a key was minted for the held wait');
  const link = await inbox.waitForLink({ kind: 'verify', timeoutMs: 5000 });
  assert.equal(link.url, 'https://app.example/verify?t=9');
  const email = await inbox.waitForEmail({ subject: 'verify' });
  const raw = new TextDecoder().decode(await email.raw());
  assert.match(raw, /Subject: Please verify your email/);
  assert.equal((await inbox.emails()).length, 2);
  assert.equal(await inbox.clear(), 2);
});

test('timeouts, expectNoEmail and typed errors', async () => {
  const mail = createEphemail({ baseUrl: svc.http });
  const inbox = mail.inbox(`quiet${Date.now()}@ephemail.test`);
  const t0 = performance.now();
  await assert.rejects(inbox.waitForEmail({ timeoutMs: 1500 }), (e: unknown) => e instanceof EphemailTimeoutError);
  // bound: the client gives up at its timeout (1.5 s), not later; one-sided and generous for a loaded machine
  assert.ok(performance.now() - t0 < 10_000);
  await inbox.expectNoEmail(1000);
  const busy = mail.inbox(`busy${Date.now()}@ephemail.test`);
  const expectation = busy.expectNoEmail(3000);
  await until(async () => (await metric(svc.http, 'ephemail_waits_held')) === 1, 'the client holds its wait');
  await svc.send({ to: busy.address, subject: 'surprise', text: 'x' });
  await assert.rejects(expectation, (e: unknown) => e instanceof EphemailError && e.type === 'unexpected_email');
  await assert.rejects(mail.getEmail('0190d5b0-0000-7000-8000-000000000000'), (e: unknown) => e instanceof EphemailError && e.type === 'not_found' && e.status === 404);
  await assert.rejects(mail.inbox('x@gmail.com').emails(), (e: unknown) => e instanceof EphemailError && e.type === 'not_found');
});
