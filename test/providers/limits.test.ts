// Limits on the provider APIs: a message over the size limit is refused in each provider's shape
// (the body over the route's limit, or the composed message over EPHEMAIL_MAX_MESSAGE_BYTES), and a
// burst past the anonymous per-IP limit gets each provider's 429 with retry-after.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MailService } from '@sendgrid/mail';
import { Client } from '@sendgrid/client';
import { SESv2Client, SendEmailCommand } from '@aws-sdk/client-sesv2';
import { SESClient, SendEmailCommand as SendEmailV1 } from '@aws-sdk/client-ses';
import FormData from 'form-data';
import Mailgun from 'mailgun.js';
import * as postmark from 'postmark';
import { Resend } from 'resend';
import { movableClock } from '../helpers/time.ts';
import { addresses, assertNothingStored, startProviderService, type TestService } from './helpers.ts';

function clients(svc: TestService) {
  const sgClient = new Client();
  sgClient.setApiKey('SG.x');
  sgClient.setDefaultRequest('baseUrl', `${svc.http}/providers/sendgrid`);
  const sendgrid = new MailService();
  sendgrid.setClient(sgClient);
  const aws = { endpoint: `${svc.http}/providers/ses`, region: 'us-east-1', credentials: { accessKeyId: 'AKIAANY', secretAccessKey: 'any' }, maxAttempts: 1 };
  return {
    sendgrid,
    resend: new Resend('re_x', { baseUrl: `${svc.http}/providers/resend` }),
    postmark: new postmark.ServerClient('x', { requestHost: `${new URL(svc.http).host}/providers/postmark`, useHttps: false }),
    mailgun: new Mailgun(FormData).client({ username: 'api', key: 'x', url: `${svc.http}/providers/mailgun` }),
    sesv2: new SESv2Client(aws),
    sesv1: new SESClient(aws),
  };
}

describe('a message over the size limit (5 MiB here)', () => {
  let svc: TestService;
  let c: ReturnType<typeof clients>;
  const MB10 = Buffer.alloc(10 * 1024 * 1024, 7);
  const MB4 = Buffer.alloc(4 * 1024 * 1024, 7); // under the body limit, over the size limit once base64 in MIME
  before(async () => {
    svc = await startProviderService({ EPHEMAIL_MAX_MESSAGE_BYTES: String(5 * 1024 * 1024) });
    c = clients(svc);
  });
  after(async () => {
    c.sesv2.destroy();
    c.sesv1.destroy();
    await svc.stop();
  });

  test('SendGrid: 413 with errors[]', async () => {
    const a = addresses('big-sg');
    for (const bytes of [MB10, MB4]) {
      await assert.rejects(c.sendgrid.send({ to: a.to, from: a.from, subject: 'big', text: 't', attachments: [{ content: bytes.toString('base64'), filename: 'big.bin' }] }), (err: any) => {
        assert.equal(err.code, 413);
        assert.match(err.response.body.errors[0].message, /limit/);
        return true;
      });
    }
    await assertNothingStored(svc, a.to);
  });

  test('Resend: a validation_error naming the limit', async () => {
    const a = addresses('big-rs');
    for (const bytes of [MB10, MB4]) {
      const { error } = await c.resend.emails.send({ from: a.from, to: a.to, subject: 'big', text: 't', attachments: [{ filename: 'big.bin', content: bytes }] });
      assert.equal(error!.name, 'validation_error');
      assert.match(error!.message, /limit/);
    }
    await assertNothingStored(svc, a.to);
  });

  test('Postmark: ErrorCode 300 naming the limit', async () => {
    const a = addresses('big-pm');
    for (const bytes of [MB10, MB4]) {
      await assert.rejects(c.postmark.sendEmail({ From: a.from, To: a.to, Subject: 'big', TextBody: 't', Attachments: [{ Name: 'big.bin', Content: bytes.toString('base64'), ContentType: 'application/octet-stream', ContentID: null as never }] }), (err: any) => {
        assert.equal(err.code, 300);
        assert.match(err.message, /limit/);
        return true;
      });
    }
    await assertNothingStored(svc, a.to);
  });

  test('Mailgun: 413 with its message', async () => {
    const a = addresses('big-mg');
    for (const bytes of [MB10, MB4]) {
      await assert.rejects(c.mailgun.messages.create('sender.example', { from: a.from, to: a.to, subject: 'big', text: 't', attachment: [{ filename: 'big.bin', data: bytes }] }), (err: any) => {
        assert.equal(err.status, 413);
        assert.match(err.details, /limit/);
        return true;
      });
    }
    await assertNothingStored(svc, a.to);
  });

  test('SES v2 and v1: MessageRejected naming the limit', async () => {
    const a = addresses('big-ses');
    for (const bytes of [MB10, MB4]) {
      await assert.rejects(c.sesv2.send(new SendEmailCommand({ FromEmailAddress: a.from, Destination: { ToAddresses: [a.to] }, Content: { Simple: { Subject: { Data: 'big' }, Body: { Text: { Data: 't' } }, Attachments: [{ FileName: 'big.bin', RawContent: bytes }] } } })), (err: any) => {
        assert.equal(err.name, 'MessageRejected');
        assert.match(err.message, /limit/);
        return true;
      });
    }
    await assert.rejects(c.sesv1.send(new SendEmailV1({ Source: a.from, Destination: { ToAddresses: [a.to] }, Message: { Subject: { Data: 'big' }, Body: { Text: { Data: 'x'.repeat(6 * 1024 * 1024) } } } })), (err: any) => {
      assert.equal(err.name, 'MessageRejected');
      assert.match(err.message, /limit/);
      return true;
    });
    await assertNothingStored(svc, a.to);
  });
});

describe('a burst past the anonymous limit', () => {
  let svc: TestService;
  let c: ReturnType<typeof clients>;
  // the service's clock: the burst and the test's calls in one fresh minute window
  const clock = movableClock();
  before(async () => {
    svc = await startProviderService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '4' }, { clock });
    c = clients(svc);
    clock.freshMinute();
    // four calls use up the minute (each provider call counts as one request of this IP)
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${svc.http}/providers/resend/emails`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(res.status, 422);
    }
  });
  after(async () => {
    c.sesv2.destroy();
    c.sesv1.destroy();
    await svc.stop();
  });
  const mail = addresses('burst');

  test('each provider answers its own 429 with retry-after', async () => {
    await assert.rejects(c.sendgrid.send({ to: mail.to, from: mail.from, subject: 's', text: 't' }), (err: any) => {
      assert.equal(err.code, 429);
      assert.ok(Number(err.response.headers['retry-after']) > 0);
      assert.match(err.response.body.errors[0].message, /requests this minute/);
      return true;
    });
    const { error, headers } = await c.resend.emails.send({ from: mail.from, to: mail.to, subject: 's', text: 't' });
    assert.equal(error!.name, 'rate_limit_exceeded');
    assert.equal((error as any).statusCode, 429);
    assert.ok(Number(headers!['retry-after']) > 0);
    await assert.rejects(c.postmark.sendEmail({ From: mail.from, To: mail.to, Subject: 's', TextBody: 't' }), (err: any) => {
      assert.ok(err instanceof postmark.Errors.RateLimitExceededError, err.constructor.name);
      return true;
    });
    await assert.rejects(c.mailgun.messages.create('sender.example', { from: mail.from, to: mail.to, subject: 's', text: 't' }), (err: any) => {
      assert.equal(err.status, 429);
      return true;
    });
    await assert.rejects(c.sesv2.send(new SendEmailCommand({ FromEmailAddress: mail.from, Destination: { ToAddresses: [mail.to] }, Content: { Simple: { Subject: { Data: 's' }, Body: { Text: { Data: 't' } } } } })), (err: any) => {
      assert.equal(err.name, 'TooManyRequestsException');
      assert.equal(err.$metadata.httpStatusCode, 429);
      return true;
    });
    await assert.rejects(c.sesv1.send(new SendEmailV1({ Source: mail.from, Destination: { ToAddresses: [mail.to] }, Message: { Subject: { Data: 's' }, Body: { Text: { Data: 't' } } } })), (err: any) => {
      assert.equal(err.name, 'Throttling');
      return true;
    });
    for (const path of ['/providers/postmark/email', '/providers/mailgun/v3/x.example/messages', '/providers/ses/v2/email/outbound-emails', '/providers/ses/']) {
      const res = await fetch(svc.http + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(res.status, 429, path);
      assert.ok(Number(res.headers.get('retry-after')) > 0, path);
      assert.ok(res.headers.get('ratelimit-limit'), path);
    }
  });
});

describe('the SMTP caps apply to provider mail', () => {
  let svc: TestService;
  let c: ReturnType<typeof clients>;
  const clock = movableClock();
  before(async () => {
    svc = await startProviderService({ EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: '1' }, { clock });
    c = clients(svc);
    clock.freshMinute();
  });
  after(async () => {
    c.sesv2.destroy();
    c.sesv1.destroy();
    await svc.stop();
  });

  test('past the per-address cap: the provider\'s 429 naming the address, the mail not stored', async () => {
    const a = addresses('capped');
    await c.sendgrid.send({ to: a.to, from: a.from, subject: 'first', text: 't' });
    await assert.rejects(c.sendgrid.send({ to: a.to, from: a.from, subject: 'second', text: 't' }), (err: any) => {
      assert.equal(err.code, 429);
      assert.ok(Number(err.response.headers['retry-after']) > 0);
      assert.match(err.response.body.errors[0].message, new RegExp(`${a.to.replace(/[.+]/g, '\\$&')} is receiving too much mail`));
      return true;
    });
    const { error } = await c.resend.emails.send({ from: a.from, to: a.to, subject: 'third', text: 't' });
    assert.equal(error!.name, 'rate_limit_exceeded');
    const list = await (await svc.api(`/api/v1/inboxes/${a.to}/emails`)).json();
    assert.deepEqual(list.data.map((e: any) => e.subject), ['first']);
  });
});

describe('request bytes in flight are bounded (EPHEMAIL_MAX_INFLIGHT_BYTES, a client a quarter of it)', () => {
  let svc: TestService;
  before(async () => {
    svc = await startProviderService({ EPHEMAIL_MAX_INFLIGHT_BYTES: '8192' });
  });
  after(() => svc.stop());

  test('a body over the client\'s share: 503 with retry-after in the provider\'s shape; a small one is taken', async () => {
    const a = addresses('inflight');
    const send = (text: string) => fetch(`${svc.http}/providers/sendgrid/v3/mail/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ personalizations: [{ to: [{ email: a.to }] }], from: { email: a.from }, subject: 's', content: [{ type: 'text/plain', value: text }] }),
    });
    const big = await send('x'.repeat(3000));
    assert.equal(big.status, 503);
    assert.equal(big.headers.get('retry-after'), '1');
    assert.match((await big.json()).errors[0].message, /in flight/);
    const small = await send('small');
    assert.equal(small.status, 202, await small.clone().text());
    // what the first held was given back: a second small one is taken too
    assert.equal((await send('again')).status, 202);
    assert.equal((await (await svc.api(`/api/v1/inboxes/${a.to}/emails`)).json()).data.length, 2);
  });
});
