// Postmark through its SDK, pointed at ephemail (docs/providers.md "Postmark").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import * as postmark from 'postmark';
import { HTML, PDF, PNG, TEXT, addresses, assertDelivered, assertNothingStored, assertTemplateCode, inbox, startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
let client: postmark.ServerClient;
before(async () => {
  svc = await startProviderService();
  client = new postmark.ServerClient('any-server-token', { requestHost: `${new URL(svc.http).host}/providers/postmark`, useHttps: false });
});
after(() => svc.stop());

test('a message with text, HTML, two attachments, cc and bcc lands in each inbox', async () => {
  const a = addresses('pm');
  const res = await client.sendEmail({
    From: `The App <${a.from}>`,
    To: a.to,
    Cc: a.cc,
    Bcc: a.bcc,
    ReplyTo: 'support@sender.example',
    Subject: 'Postmark says hello',
    TextBody: TEXT,
    HtmlBody: HTML,
    Attachments: [
      { Name: 'pixel.png', Content: PNG.toString('base64'), ContentType: 'image/png', ContentID: null as never },
      { Name: 'report.pdf', Content: PDF.toString('base64'), ContentType: 'application/pdf', ContentID: null as never },
    ],
    Headers: [{ Name: 'X-Test-Run', Value: 'postmark' }],
    Tag: 'welcome',
    MessageStream: 'outbound',
  });
  assert.equal(res.ErrorCode, 0);
  assert.equal(res.Message, 'OK');
  assert.equal(res.To, `${a.to}, ${a.cc}`);
  assert.match(res.MessageID, /^[0-9a-f-]{36}$/);
  assert.ok(!Number.isNaN(Date.parse(res.SubmittedAt)));
  await assertDelivered(svc, a, 'Postmark says hello', { provider: /Postmark API emulation/ });
});

test('templates (one and a batch) keep their model; latest finds the code; a batch answers per message', async () => {
  const a = addresses('pmt');
  const res = await client.sendEmailWithTemplate({ From: a.from, To: a.to, TemplateAlias: 'welcome', TemplateModel: { product: 'Acme', login_code: '604218' } });
  assert.equal(res.ErrorCode, 0);
  await assertTemplateCode(svc, a.to, '604218');
  const b = addresses('pmb');
  const batch = await client.sendEmailBatchWithTemplates([{ From: b.from, To: b.to, TemplateId: 12345, TemplateModel: { verification_code: '118822' } }]);
  assert.equal(batch[0].ErrorCode, 0);
  await assertTemplateCode(svc, b.to, '118822');
  const c = addresses('pmc');
  const plain = await client.sendEmailBatch([{ From: c.from, To: c.to, Subject: 'one', TextBody: 'x' }, { From: c.from, To: 'x@elsewhere.example', Subject: 'two', TextBody: 'y' }]);
  assert.deepEqual(plain.map((r) => r.ErrorCode), [0, 300]);
  assert.match(plain[1].Message, /x@elsewhere\.example/);
  assert.deepEqual((await inbox(svc, c.to)).map((e) => e.subject), ['one']);
});

test('a recipient at an unserved domain: a Postmark error naming it, nothing stored', async () => {
  const a = addresses('pmx');
  await assert.rejects(client.sendEmail({ From: a.from, To: `${a.to}, someone@elsewhere.example`, Subject: 's', TextBody: 't' }), (err: any) => {
    assert.ok(err instanceof postmark.Errors.ApiInputError, err.constructor.name);
    assert.equal(err.code, 300);
    assert.equal(err.statusCode, 422);
    assert.match(err.message, /someone@elsewhere\.example/);
    return true;
  });
  await assertNothingStored(svc, a.to);
});

test('a malformed body: Postmark errors naming the field, nothing stored', async () => {
  const a = addresses('pmm');
  await assert.rejects(client.sendEmail({ From: a.from, To: a.to, Subject: 'no body' }), (err: any) => {
    assert.equal(err.code, 300);
    assert.match(err.message, /TextBody or HtmlBody/);
    return true;
  });
  const res = await fetch(`${svc.http}/providers/postmark/email`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: '{"From":' });
  assert.equal(res.status, 422);
  assert.deepEqual(await res.json(), { ErrorCode: 300, Message: 'The request body is not valid JSON' });
  await assertNothingStored(svc, a.to);
});
