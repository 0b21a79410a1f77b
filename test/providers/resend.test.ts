// Resend through its SDK, pointed at ephemail (docs/providers.md "Resend").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Resend } from 'resend';
import { HTML, PDF, PNG, TEXT, addresses, assertDelivered, assertNothingStored, assertTemplateCode, inbox, startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
let resend: Resend;
before(async () => {
  svc = await startProviderService();
  resend = new Resend('re_any_key_is_taken', { baseUrl: `${svc.http}/providers/resend` });
});
after(() => svc.stop());

test('a message with text, HTML, two attachments, cc and bcc lands in each inbox', async () => {
  const a = addresses('rs');
  const { data, error } = await resend.emails.send({
    from: `The App <${a.from}>`,
    to: [a.to],
    cc: a.cc,
    bcc: [a.bcc],
    replyTo: 'support@sender.example',
    subject: 'Resend says hello',
    text: TEXT,
    html: HTML,
    attachments: [
      { filename: 'pixel.png', content: PNG, contentType: 'image/png' },
      { filename: 'report.pdf', content: PDF.toString('base64'), contentType: 'application/pdf' },
    ],
    headers: { 'X-Test-Run': 'resend' },
    tags: [{ name: 'kind', value: 'welcome' }],
  });
  assert.equal(error, null);
  assert.match(data!.id, /^[0-9a-f-]{36}$/);
  await assertDelivered(svc, a, 'Resend says hello', { provider: /Resend API emulation/ });
});

test('a batch: {data: [{id}]}, one email per entry; a template keeps its variables', async () => {
  const a = addresses('rsb');
  const b = addresses('rsb');
  const { data, error } = await resend.batch.send([
    { from: a.from, to: a.to, subject: 'first', text: 'one' },
    { from: b.from, to: b.to, template: { id: 'welcome-template', variables: { verification_code: '730142' } } } as never,
  ]);
  assert.equal(error, null);
  assert.equal(data!.data.length, 2);
  assert.equal((await inbox(svc, a.to))[0].subject, 'first');
  await assertTemplateCode(svc, b.to, '730142');
});

test('a recipient at an unserved domain: a Resend error naming it, nothing stored', async () => {
  const a = addresses('rsx');
  const { data, error } = await resend.emails.send({ from: a.from, to: [a.to, 'someone@elsewhere.example'], subject: 's', text: 't' });
  assert.equal(data, null);
  assert.equal(error!.name, 'validation_error');
  assert.match(error!.message, /someone@elsewhere\.example/);
  await assertNothingStored(svc, a.to);
  // a batch with one bad entry stores none of it
  const batch = await resend.batch.send([{ from: a.from, to: a.to, subject: 's', text: 't' }, { from: a.from, to: 'x@elsewhere.example', subject: 's', text: 't' }]);
  assert.equal(batch.error!.name, 'validation_error');
  await assertNothingStored(svc, a.to);
});

test('a malformed body: Resend errors naming the field, nothing stored', async () => {
  const a = addresses('rsm');
  const { error } = await resend.emails.send({ to: a.to, subject: 's', text: 't' } as never);
  assert.equal(error!.name, 'missing_required_field');
  assert.match(error!.message, /from/);
  const res = await fetch(`${svc.http}/providers/resend/emails`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"from":' });
  assert.equal(res.status, 422);
  assert.deepEqual(Object.keys(await res.json()).sort(), ['message', 'name', 'statusCode']);
  await assertNothingStored(svc, a.to);
});
