// Amazon SES through the AWS SDK v3 (v2 and v1 clients) and nodemailer's SES transport, pointed at
// ephemail (docs/providers.md "Amazon SES").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SESv2Client, SendEmailCommand } from '@aws-sdk/client-sesv2';
import { SESClient, SendEmailCommand as SendEmailV1, SendRawEmailCommand, SendTemplatedEmailCommand } from '@aws-sdk/client-ses';
import nodemailer from 'nodemailer';
import { HTML, PDF, PNG, TEXT, addresses, assertDelivered, assertNothingStored, assertTemplateCode, startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
let v2: SESv2Client;
let v1: SESClient;
// any static credentials and a region: the SDK asks nothing of the outside
const sdk = () => ({ endpoint: `${svc.http}/providers/ses`, region: 'us-east-1', credentials: { accessKeyId: 'AKIAANY', secretAccessKey: 'any-secret' }, maxAttempts: 1 });
before(async () => {
  svc = await startProviderService();
  v2 = new SESv2Client(sdk());
  v1 = new SESClient(sdk());
});
after(async () => {
  v2.destroy();
  v1.destroy();
  await svc.stop();
});

/** The test message composed as MIME by nodemailer (for the Raw paths), without a Bcc header. */
async function mime(a: ReturnType<typeof addresses>, subject: string): Promise<Buffer> {
  const info = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail({
    from: `The App <${a.from}>`, to: a.to, cc: a.cc, subject, text: TEXT, html: HTML,
    attachments: [{ filename: 'pixel.png', content: PNG, contentType: 'image/png' }, { filename: 'report.pdf', content: PDF, contentType: 'application/pdf' }],
  });
  return info.message as Buffer;
}

test('SES v2 Simple: text, HTML, two attachments, cc and bcc land in each inbox', async () => {
  const a = addresses('sesv2');
  const res = await v2.send(new SendEmailCommand({
    FromEmailAddress: `The App <${a.from}>`,
    Destination: { ToAddresses: [a.to], CcAddresses: [a.cc], BccAddresses: [a.bcc] },
    ReplyToAddresses: ['support@sender.example'],
    Content: {
      Simple: {
        Subject: { Data: 'SES v2 says hello' },
        Body: { Text: { Data: TEXT }, Html: { Data: HTML } },
        Headers: [{ Name: 'X-Test-Run', Value: 'ses-v2' }],
        Attachments: [
          { FileName: 'pixel.png', ContentType: 'image/png', RawContent: PNG },
          { FileName: 'report.pdf', ContentType: 'application/pdf', RawContent: PDF },
        ],
      },
    },
    EmailTags: [{ Name: 'kind', Value: 'welcome' }],
  }));
  assert.match(res.MessageId!, /^0100[0-9a-f]{12}-[0-9a-f-]{36}-000000$/);
  await assertDelivered(svc, a, 'SES v2 says hello', { provider: /Amazon SES v2 API emulation/ });
});

test('SES v2 Raw, and nodemailer\'s SES transport: delivered to the Destination (bcc included)', async () => {
  const a = addresses('sesraw');
  await v2.send(new SendEmailCommand({ Destination: { ToAddresses: [a.to, a.cc, a.bcc] }, Content: { Raw: { Data: await mime(a, 'SES v2 raw') } } }));
  await assertDelivered(svc, a, 'SES v2 raw');
  const b = addresses('sesnm');
  const transport = nodemailer.createTransport({ SES: { sesClient: v2, SendEmailCommand } });
  const info = await transport.sendMail({
    from: `The App <${b.from}>`, to: b.to, cc: b.cc, bcc: b.bcc, subject: 'nodemailer SES', text: TEXT, html: HTML,
    attachments: [{ filename: 'pixel.png', content: PNG, contentType: 'image/png' }, { filename: 'report.pdf', content: PDF, contentType: 'application/pdf' }],
  });
  assert.ok(info.messageId);
  await assertDelivered(svc, b, 'nodemailer SES');
});

test('SES v2 Template: the template data is kept; latest finds the code', async () => {
  const a = addresses('sest');
  await v2.send(new SendEmailCommand({ FromEmailAddress: a.from, Destination: { ToAddresses: [a.to] }, Content: { Template: { TemplateName: 'Welcome', TemplateData: JSON.stringify({ verification_code: '331907' }) } } }));
  await assertTemplateCode(svc, a.to, '331907');
});

test('SES v1 SendEmail and SendRawEmail (Query protocol, XML answers); SendTemplatedEmail', async () => {
  const a = addresses('sesv1');
  const res = await v1.send(new SendEmailV1({
    Source: a.from,
    Destination: { ToAddresses: [a.to], CcAddresses: [a.cc], BccAddresses: [a.bcc] },
    Message: { Subject: { Data: 'SES v1 says hello' }, Body: { Text: { Data: TEXT }, Html: { Data: HTML } } },
  }));
  assert.match(res.MessageId!, /^0100/);
  await assertDelivered(svc, a, 'SES v1 says hello', { attachments: false, provider: /Amazon SES v1 API emulation/ });
  const b = addresses('sesv1raw');
  const raw = await v1.send(new SendRawEmailCommand({ Destinations: [b.to, b.cc, b.bcc], RawMessage: { Data: await mime(b, 'SES v1 raw') } }));
  assert.match(raw.MessageId!, /^0100/);
  await assertDelivered(svc, b, 'SES v1 raw');
  const c = addresses('sesv1t');
  await v1.send(new SendTemplatedEmailCommand({ Source: c.from, Destination: { ToAddresses: [c.to] }, Template: 'Welcome', TemplateData: JSON.stringify({ code: '204817' }) }));
  await assertTemplateCode(svc, c.to, '204817');
});

test('a recipient at an unserved domain: the SDK throws MessageRejected naming it, nothing stored', async () => {
  const a = addresses('sesx');
  await assert.rejects(v2.send(new SendEmailCommand({ FromEmailAddress: a.from, Destination: { ToAddresses: [a.to, 'someone@elsewhere.example'] }, Content: { Simple: { Subject: { Data: 's' }, Body: { Text: { Data: 't' } } } } })), (err: any) => {
    assert.equal(err.name, 'MessageRejected');
    assert.equal(err.$metadata.httpStatusCode, 400);
    assert.match(err.message, /someone@elsewhere\.example/);
    return true;
  });
  await assert.rejects(v1.send(new SendEmailV1({ Source: a.from, Destination: { ToAddresses: [a.to, 'someone@elsewhere.example'] }, Message: { Subject: { Data: 's' }, Body: { Text: { Data: 't' } } } })), (err: any) => {
    assert.equal(err.name, 'MessageRejected');
    assert.match(err.message, /someone@elsewhere\.example/);
    return true;
  });
  await assertNothingStored(svc, a.to);
});

test('a malformed body: the SDK throws the error type naming the field, nothing stored', async () => {
  const a = addresses('sesm');
  await assert.rejects(v2.send(new SendEmailCommand({ FromEmailAddress: a.from, Destination: { ToAddresses: [a.to] }, Content: { Simple: { Subject: { Data: 's' }, Body: {} } } })), (err: any) => {
    assert.equal(err.name, 'BadRequestException');
    assert.match(err.message, /Content\.Simple\.Body/);
    return true;
  });
  await assert.rejects(v1.send(new SendEmailV1({ Source: a.from, Destination: { ToAddresses: [a.to] }, Message: { Subject: { Data: 's' }, Body: {} } })), (err: any) => {
    assert.equal(err.name, 'MissingParameter');
    assert.match(err.message, /Message\.Body/);
    return true;
  });
  const res = await fetch(`${svc.http}/providers/ses/v2/email/outbound-emails`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"Content":' });
  assert.equal(res.status, 400);
  assert.equal(res.headers.get('x-amzn-errortype'), 'BadRequestException');
  await assertNothingStored(svc, a.to);
});
