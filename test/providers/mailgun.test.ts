// Mailgun through mailgun.js, pointed at ephemail (docs/providers.md "Mailgun").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import FormData from 'form-data';
import Mailgun from 'mailgun.js';
import nodemailer from 'nodemailer';
import { HTML, PDF, PNG, TEXT, addresses, assertDelivered, assertNothingStored, assertTemplateCode, inbox, rawOf, startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
let mg: ReturnType<Mailgun['client']>;
before(async () => {
  svc = await startProviderService();
  mg = new Mailgun(FormData).client({ username: 'api', key: 'any-key-is-taken', url: `${svc.http}/providers/mailgun` });
});
after(() => svc.stop());

test('a message with text, HTML, two attachments, cc and bcc lands in each inbox', async () => {
  const a = addresses('mg');
  const res = await mg.messages.create('sender.example', {
    from: `The App <${a.from}>`,
    to: [a.to],
    cc: a.cc,
    bcc: a.bcc,
    subject: 'Mailgun says hello',
    text: TEXT,
    html: HTML,
    attachment: [
      { filename: 'pixel.png', data: PNG, contentType: 'image/png' },
      { filename: 'report.pdf', data: PDF, contentType: 'application/pdf' },
    ],
    'h:X-Test-Run': 'mailgun',
    'h:Reply-To': 'support@sender.example',
    'o:tag': ['welcome'],
    'o:testmode': true,
    'v:user': '42',
  });
  assert.equal(res.status, 200);
  assert.equal(res.message, 'Queued. Thank you.');
  assert.match(res.id!, /^<\d{14}\.[0-9a-f]{16}@sender\.example>$/);
  const email = await assertDelivered(svc, a, 'Mailgun says hello', { provider: /Mailgun API emulation/ });
  const raw = await rawOf(svc, email.id);
  assert.match(raw, /^X-Test-Run: mailgun/m);
  assert.match(raw, /^Reply-To: support@sender\.example/m);
  assert.match(raw, /^X-Mailgun-Variables: \{"user":"42"\}/m);
});

test('messages.mime: the MIME as sent, delivered to `to` (bcc included); a template keeps its variables', async () => {
  const a = addresses('mgm');
  const composed = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail({
    from: a.from, to: a.to, cc: a.cc, subject: 'Mailgun MIME', text: TEXT, html: HTML,
    attachments: [{ filename: 'pixel.png', content: PNG, contentType: 'image/png' }, { filename: 'report.pdf', content: PDF, contentType: 'application/pdf' }],
  });
  const res = await mg.messages.create('sender.example', { to: [a.to, a.cc, a.bcc], message: composed.message as Buffer });
  assert.equal(res.message, 'Queued. Thank you.');
  await assertDelivered(svc, a, 'Mailgun MIME');
  const t = addresses('mgt');
  await mg.messages.create('sender.example', { from: t.from, to: t.to, template: 'welcome', 't:variables': JSON.stringify({ one_time_code: '559120' }) });
  await assertTemplateCode(svc, t.to, '559120');
});

test('a recipient at an unserved domain: a Mailgun error naming it, nothing stored', async () => {
  const a = addresses('mgx');
  await assert.rejects(mg.messages.create('sender.example', { from: a.from, to: [a.to, 'someone@elsewhere.example'], subject: 's', text: 't' }), (err: any) => {
    assert.equal(err.status, 400);
    assert.match(err.details, /someone@elsewhere\.example/);
    return true;
  });
  await assertNothingStored(svc, a.to);
});

test('a malformed body: Mailgun errors naming the field, nothing stored', async () => {
  const a = addresses('mgm2');
  await assert.rejects(mg.messages.create('sender.example', { from: a.from, to: a.to, text: 'no subject' } as never), (err: any) => {
    assert.equal(err.status, 400);
    assert.match(err.details, /subject/);
    return true;
  });
  const res = await fetch(`${svc.http}/providers/mailgun/v3/sender.example/messages`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: '--x\r\nContent-Disposition: form-data; name="from"\r\n\r\nbroken' });
  assert.equal(res.status, 400);
  assert.deepEqual(Object.keys(await res.json()), ['message']);
  await assertNothingStored(svc, a.to);
});

test('messages.mime with bare LF line endings: stored, the trace in the same line ending', async () => {
  const a = addresses('mglf');
  const mimeText = `From: ${a.from}\nTo: ${a.to}\nSubject: bare LF\nContent-Type: text/plain\n\nhello\n`;
  await mg.messages.create('sender.example', { to: a.to, message: Buffer.from(mimeText) });
  const [e] = await inbox(svc, a.to);
  assert.equal(e.subject, 'bare LF');
  const raw = await (await svc.api(`/api/v1/emails/${e.id}/raw`)).text();
  assert.match(raw, /^Received: [^\r]*\nFrom: /);
});
