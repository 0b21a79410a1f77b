// SendGrid v3 through @sendgrid/mail, pointed at ephemail (docs/providers.md "SendGrid").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MailService } from '@sendgrid/mail';
import { Client } from '@sendgrid/client';
import { HTML, PDF, PNG, TEXT, addresses, assertDelivered, assertNothingStored, assertTemplateCode, fullEmail, inbox, rawOf, startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
let mail: MailService;
before(async () => {
  svc = await startProviderService();
  mail = new MailService();
  const client = new Client();
  client.setApiKey('SG.any-key-is-taken');
  // setApiKey sets the base URL of SendGrid's region: ours comes after it
  client.setDefaultRequest('baseUrl', `${svc.http}/providers/sendgrid`);
  mail.setClient(client);
});
after(() => svc.stop());

test('a message with text, HTML, two attachments, cc and bcc lands in each inbox', async () => {
  const a = addresses('sg');
  const [res] = await mail.send({
    to: { email: a.to, name: 'To Person' },
    cc: a.cc,
    bcc: a.bcc,
    from: { email: a.from, name: 'The App' },
    replyTo: 'support@sender.example',
    subject: 'SendGrid says hello',
    text: TEXT,
    html: HTML,
    attachments: [
      { content: PNG.toString('base64'), filename: 'pixel.png', type: 'image/png', disposition: 'attachment' },
      { content: PDF.toString('base64'), filename: 'report.pdf', type: 'application/pdf' },
    ],
    headers: { 'X-Test-Run': 'sendgrid' },
    categories: ['welcome'],
    customArgs: { user: '42' },
    sendAt: Math.floor(Date.now() / 1000) + 3600,
  });
  assert.equal(res.statusCode, 202);
  assert.match(String(res.headers['x-message-id']), /^[\w-]{22}$/);
  const email = await assertDelivered(svc, a, 'SendGrid says hello', { provider: /SendGrid v3/ });
  const raw = await rawOf(svc, email.id);
  assert.match(raw, /^X-Test-Run: sendgrid/m);
  assert.match(raw, /^Reply-To: support@sender\.example/m);
  assert.match(raw, new RegExp(`^Message-ID: <${res.headers['x-message-id']}@`, 'm'));
  assert.equal(email.authentication, null, 'no SMTP envelope: no verdicts');
});

test('a dynamic template: its data is kept as text, and latest finds the code', async () => {
  const a = addresses('sgt');
  await mail.send({ to: a.to, from: a.from, templateId: 'd-0123456789abcdef', dynamicTemplateData: { name: 'Ada', verification_code: '482913' } });
  await assertTemplateCode(svc, a.to, '482913');
});

test('a recipient at an unserved domain: a SendGrid error naming it, nothing stored', async () => {
  const a = addresses('sgx');
  await assert.rejects(
    mail.send({ to: [a.to, 'someone@elsewhere.example'], from: a.from, subject: 's', text: 't' }),
    (err: any) => {
      assert.equal(err.code, 400);
      assert.match(err.response.body.errors[0].message, /someone@elsewhere\.example/);
      assert.match(String(err), /elsewhere\.example/);
      return true;
    },
  );
  await assertNothingStored(svc, a.to);
});

test('a malformed body: SendGrid errors naming the field, nothing stored', async () => {
  const a = addresses('sgm');
  await assert.rejects(mail.send({ to: a.to, from: a.from, subject: 'no content' } as never), (err: any) => {
    assert.equal(err.code, 400);
    assert.equal(err.response.body.errors[0].field, 'content');
    return true;
  });
  const res = await fetch(`${svc.http}/providers/sendgrid/v3/mail/send`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer x' }, body: '{"personalizations": [' });
  assert.equal(res.status, 400);
  assert.match((await res.json()).errors[0].message, /not valid JSON/);
  await assertNothingStored(svc, a.to);
});

test('an inline image keeps its Content-ID (cid: in the HTML); several personalizations are several messages', async () => {
  const a = addresses('sgi');
  const b = addresses('sgi');
  await mail.send({
    personalizations: [{ to: [{ email: a.to }], subject: 'for a' }, { to: [{ email: b.to }], subject: 'for b' }],
    from: { email: a.from },
    subject: 'default',
    content: [{ type: 'text/html', value: '<p><img src="cid:logo"></p>' }],
    attachments: [{ content: PNG.toString('base64'), filename: 'logo.png', type: 'image/png', disposition: 'inline', content_id: 'logo' }],
  } as never);
  const [ea] = await inbox(svc, a.to);
  const [eb] = await inbox(svc, b.to);
  assert.equal(ea.subject, 'for a');
  assert.equal(eb.subject, 'for b');
  const full = await fullEmail(svc, ea.id);
  assert.deepEqual(full.attachments.map((x: any) => [x.filename, x.content_id]), [['logo.png', 'logo']]);
});
