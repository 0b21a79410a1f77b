// "Get a code in two calls" over the official SDK client: check_inbox waits for the matching email
// only (from/subject), read_email gives its codes and links.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { connectClient } from './helpers.ts';
import { metric } from '../helpers/metrics.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  svc = await startService();
});
after(() => svc.stop());

test('check_inbox with subject and wait_seconds skips other mail; read_email returns the code and the action link', async () => {
  const { client } = await connectClient(svc);
  try {
    const created = (await client.callTool({ name: 'create_inbox', arguments: {} })).structuredContent as { address: string };
    const address = created.address;
    const waiting = client.callTool({ name: 'check_inbox', arguments: { address, wait_seconds: 20, subject: 'verification' } });
    await until(() => svc.service.core.waits.held === 1, 'check_inbox is held');
    const lists = () => metric(svc.http, 'ephemail_store_operation_seconds_count{op="listEmails"}');
    const listsBefore = await lists();
    await sendRaw(svc.smtpPort, { from: 'news@shop.example', to: [address], body: message({ From: 'news@shop.example', Subject: 'Weekly deals' }, 'Nothing to see, order #123456') });
    // the newsletter woke the wait, which queried again, found no match and waits on
    await until(async () => (await lists()) > listsBefore, 'the woken wait queried again');
    const html = '<p>Your verification code is <b>559 120</b>.</p><p><a href="https://app.example/verify?t=1">Verify email</a></p>';
    await sendRaw(svc.smtpPort, { from: 'auth@app.example', to: [address], body: message({ From: 'App <auth@app.example>', Subject: 'Your verification code', 'Content-Type': 'text/html; charset=utf-8' }, html) });
    const listed = (await waiting).structuredContent as { emails: { id: string; subject: string }[] };
    assert.deepEqual(listed.emails.map((e) => e.subject), ['Your verification code'], 'only the matching email');
    const read = await client.callTool({ name: 'read_email', arguments: { email_id: listed.emails[0].id } });
    const s = read.structuredContent as { codes: { value: string }[]; links: { url: string; kind: string }[] };
    assert.equal(s.codes[0].value, '559120');
    assert.deepEqual([s.links[0].kind, s.links[0].url], ['verify', 'https://app.example/verify?t=1']);
    const text = (read.content as { text: string }[])[0].text;
    assert.match(text, /Code \(extracted from the untrusted email\): 559120/);
    assert.match(text, /Main action link \(verify, extracted from the untrusted email\): https:\/\/app\.example\/verify\?t=1/);
    assert.ok(text.indexOf('559120') < text.indexOf('BEGIN EMAIL BODY'), 'above the untrusted block');
  } finally {
    await client.close();
  }
});
