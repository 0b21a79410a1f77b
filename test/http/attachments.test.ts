// Attachments: list endpoint, download bytes and headers (docs/contract-decisions.md "Attachment download").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { expectLimitHeaders, listAll } from '../helpers/contract.ts';

let svc: TestService;
let email: any;
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
const html = Buffer.from('<html><script>alert(1)</script></html>');
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000' });
  await svc.send({
    to: 'files@ephemail.test',
    subject: 'files',
    text: 'see attached',
    attachments: [
      { filename: 'Résumé – 2026 "final".pdf', content: Buffer.from('%PDF-1.4 fake'), contentType: 'application/pdf' },
      { filename: 'pixel.png', content: png, contentType: 'image/png' },
      { filename: 'page.html', content: html, contentType: 'text/html' },
      { filename: '../../etc/passwd', content: 'root:x:0:0', contentType: 'text/plain' },
      { filename: '日本語.txt', content: 'こんにちは', contentType: 'text/plain; charset=utf-8' },
    ],
  });
  const [s] = await listAll(svc.api, 'files@ephemail.test');
  email = (await (await svc.api(`/api/v1/emails/${s.id}`)).json()).data;
});
after(() => svc.stop());

const local = (url: string) => url.replace(/^https?:\/\/[^/]+/, svc.http);

/** RFC 6266/5987 filename* value of a Content-Disposition header, decoded. */
function filenameStar(cd: string): string | null {
  const m = /filename\*\s*=\s*UTF-8''([^;\s]+)/i.exec(cd);
  return m ? decodeURIComponent(m[1]) : null;
}

test('list endpoint agrees with the inlined list; filenames are safe', async () => {
  const res = await svc.api(`/api/v1/emails/${email.id}/attachments`);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body.data, email.attachments);
  assert.deepEqual(body.meta, { email_id: email.id, count: 5 });
  const names = email.attachments.map((a: any) => a.filename);
  assert.deepEqual(names.slice(0, 3), ['Résumé – 2026 "final".pdf', 'pixel.png', 'page.html']);
  for (const n of names) {
    assert.ok(n.length > 0);
    assert.doesNotMatch(n, /[/\\]/, `no path separators in ${n}`);
    assert.ok(!n.split(/[/\\]/).includes('..'));
  }
  assert.equal(names[3], 'passwd');
  assert.equal(names[4], '日本語.txt');
  assert.equal(new Set(email.attachments.map((a: any) => a.id)).size, 5, 'ids unique within the email');
});

test('download: bytes equal size_bytes and the sent content; headers per docs/contract-decisions.md', async () => {
  const sent = [Buffer.from('%PDF-1.4 fake'), png, html, Buffer.from('root:x:0:0'), Buffer.from('こんにちは')];
  for (const [i, a] of email.attachments.entries()) {
    const res = await fetch(local(a.download_url));
    assert.equal(res.status, 200);
    expectLimitHeaders(res);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(bytes.length, a.size_bytes, `${a.filename}: size_bytes`);
    assert.ok(bytes.equals(sent[i]), `${a.filename}: bytes`);
    assert.equal(res.headers.get('content-type')?.split(';')[0].trim(), a.content_type.split(';')[0]);
    const cd = res.headers.get('content-disposition') ?? '';
    assert.match(cd, /^attachment\s*;/i, `attachment disposition: ${cd}`);
    assert.equal(filenameStar(cd), a.filename, `filename* round-trips: ${cd}`);
    assert.doesNotMatch(cd, /[\r\n]/);
    // the plain filename="" fallback is ASCII and quoted safely
    const plain = /filename="((?:[^"\\]|\\.)*)"/.exec(cd);
    assert.ok(plain, `ASCII fallback present: ${cd}`);
    assert.match(plain[1], /^[\x20-\x7e]*$/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.match(res.headers.get('content-security-policy') ?? '', /(^|;)\s*sandbox\b/);
  }
});

test('an HTML attachment is never served for inline rendering', async () => {
  const a = email.attachments[2];
  const res = await fetch(local(a.download_url));
  assert.match(res.headers.get('content-disposition') ?? '', /^attachment/i);
  assert.match(res.headers.get('content-security-policy') ?? '', /sandbox/);
  await res.arrayBuffer();
});

test('RFC 2231 and encoded-word filenames from raw MIME are decoded', async () => {
  const body = [
    'From: a@example.org', 'Subject: names', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="b"', '',
    '--b', 'Content-Type: text/plain', '', 'x',
    '--b', "Content-Type: application/octet-stream; name*=UTF-8''%E2%82%AC%20rates.csv", "Content-Disposition: attachment; filename*=UTF-8''%E2%82%AC%20rates.csv", 'Content-Transfer-Encoding: base64', '', Buffer.from('a,b\n1,2\n').toString('base64'),
    '--b', 'Content-Type: application/octet-stream', 'Content-Disposition: attachment; filename="=?UTF-8?B?w7xiZXIudHh0?="', 'Content-Transfer-Encoding: base64', '', Buffer.from('über').toString('base64'),
    '--b', 'Content-Type: application/octet-stream', 'Content-Disposition: attachment', 'Content-Transfer-Encoding: base64', '', Buffer.from('anon').toString('base64'),
    '--b', 'Content-Type: text/plain', "Content-Disposition: attachment; filename*0*=UTF-8''%C3%A9t%C3%A9%20long%20;", ' filename*1*=%20name.txt', '', 'continued',
    '--b--', '',
  ].join('\r\n');
  const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: ['names@ephemail.test'], body });
  assert.equal(r.data?.code, 250);
  const [s] = await listAll(svc.api, 'names@ephemail.test');
  const e = (await (await svc.api(`/api/v1/emails/${s.id}`)).json()).data;
  assert.deepEqual(e.attachments.map((a: any) => a.filename).slice(0, 2), ['€ rates.csv', 'über.txt']);
  assert.ok(e.attachments[2].filename.length > 0, 'a nameless attachment gets a name');
  for (const a of e.attachments) {
    const res = await fetch(local(a.download_url));
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(bytes.length, a.size_bytes);
    assert.equal(filenameStar(res.headers.get('content-disposition') ?? ''), a.filename);
  }
});
