// The SMTP receiver over raw sockets (docs/contract-decisions.md "Sizes", "mailed_by"), and the
// HTML / header decoding rules of the stored result (part 7).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, sendRaw, message, toWire } from '../helpers/smtp.ts';
import { expectFull, listAll } from '../helpers/contract.ts';

let svc: TestService;
const MAX = 16 * 1024 * 1024; // whole-message limit for this test service
before(async () => {
  svc = await startService({
    EPHEMAIL_DOMAINS: 'ephemail.test,other.test',
    EPHEMAIL_MAX_MESSAGE_BYTES: String(MAX),
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '100000',
  });
});
after(() => svc.stop());

const full = async (id: string) => {
  const res = await svc.api(`/api/v1/emails/${id}`);
  assert.equal(res.status, 200);
  const e = (await res.json()).data;
  expectFull(e);
  return e;
};
const only = async (address: string) => {
  const list = await listAll(svc.api, address);
  assert.equal(list.length, 1, `${address} holds exactly one email`);
  return full(list[0].id);
};

describe('dialogue', () => {
  test('EHLO advertises SIZE, PIPELINING, 8BITMIME, SMTPUTF8 and no AUTH/STARTTLS', async () => {
    const { client, greeting } = await SmtpClient.open(svc.smtpPort);
    assert.equal(greeting.code, 220);
    const ehlo = await client.cmd('EHLO client.example');
    assert.equal(ehlo.code, 250);
    const ext = ehlo.lines.slice(1).map((l) => l.toUpperCase());
    assert.ok(ext.includes(`SIZE ${MAX}`), `SIZE ${MAX} in ${ext}`);
    for (const e of ['PIPELINING', '8BITMIME', 'SMTPUTF8']) assert.ok(ext.includes(e), `${e} in ${ext}`);
    assert.ok(!ext.some((l) => l.startsWith('AUTH')), 'no AUTH');
    assert.ok(!ext.some((l) => l.startsWith('STARTTLS')), 'no STARTTLS offered (no certificate)');
    await client.quit();
  });

  test('the default whole-message limit is 30 MiB (SIZE 31457280)', async () => {
    const d = await startService();
    try {
      const { client } = await SmtpClient.open(d.smtpPort);
      const ehlo = await client.cmd('EHLO client.example');
      assert.ok(ehlo.lines.includes('SIZE 31457280'), ehlo.text);
      await client.quit();
    } finally {
      await d.stop();
    }
  });

  test('RCPT to another domain → 550 5.1.2; the session continues', async () => {
    const { client } = await SmtpClient.open(svc.smtpPort);
    await client.cmd('EHLO client.example');
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    const bad = await client.cmd('RCPT TO:<someone@gmail.com>');
    assert.equal(bad.code, 550);
    assert.match(bad.text, /^5\.1\.2 /);
    const sub = await client.cmd('RCPT TO:<x@sub.ephemail.test>');
    assert.equal(sub.code, 550, 'a subdomain is another domain');
    assert.equal((await client.cmd('RCPT TO:<ok@ephemail.test>')).code, 250);
    const d = await client.data(toWire(message({ From: 'a@example.org', Subject: 'after reject' }, 'hi')));
    assert.equal(d.code, 250);
    await client.quit();
    assert.equal((await only('ok@ephemail.test')).subject, 'after reject');
  });

  test('MAIL FROM with SIZE over the limit is refused up front (552)', async () => {
    const { client } = await SmtpClient.open(svc.smtpPort);
    await client.cmd('EHLO client.example');
    const r = await client.cmd(`MAIL FROM:<a@example.org> SIZE=${MAX + 1}`);
    assert.equal(r.code, 552);
    await client.quit();
  });

  test('case-insensitive local part and domain', async () => {
    const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: ['MiXeD.Case@EPHEMAIL.TEST'], body: message({ From: 'a@example.org', Subject: 'case' }, 'x') });
    assert.equal(r.rcpt[0].code, 250);
    assert.equal(r.data?.code, 250);
    const e = await only('mixed.case@ephemail.test');
    assert.equal(e.address, 'mixed.case@ephemail.test');
    assert.equal((await listAll(svc.api, 'MIXED.CASE@ephemail.test')).length, 1);
  });

  test('one transaction to 3 served addresses (and one foreign) → one copy per inbox', async () => {
    const to = ['one@ephemail.test', 'two@ephemail.test', 'three@other.test', 'ONE@ephemail.test', 'far@away.example'];
    const r = await sendRaw(svc.smtpPort, { from: 'multi@example.org', to, body: message({ From: 'multi@example.org', Subject: 'fan-out' }, 'x') });
    assert.deepEqual(r.rcpt.map((x) => x.code), [250, 250, 250, 250, 550]);
    assert.equal(r.data?.code, 250);
    const ids = new Set<string>();
    for (const a of ['one@ephemail.test', 'two@ephemail.test', 'three@other.test']) {
      const e = await only(a);
      assert.equal(e.subject, 'fan-out');
      assert.equal(e.address, a);
      ids.add(e.id);
    }
    assert.equal(ids.size, 3, 'each inbox has its own copy');
    // deleting one copy leaves the others
    assert.equal((await svc.api(`/api/v1/emails/${[...ids][0]}`, { method: 'DELETE' })).status, 204);
    assert.equal((await listAll(svc.api, 'two@ephemail.test')).length, 1);
  });

  test('oversize message → 552 and nothing stored; the next message is accepted', async () => {
    const { client } = await SmtpClient.open(svc.smtpPort);
    await client.cmd('EHLO client.example');
    await client.cmd('MAIL FROM:<big@example.org>');
    await client.cmd('RCPT TO:<oversize@ephemail.test>');
    const line = `${'A'.repeat(998)}\r\n`;
    const body = Buffer.from(`From: big@example.org\r\nSubject: too big\r\n\r\n${line.repeat(Math.ceil((MAX + 10_000) / line.length))}`);
    const d = await client.data(body);
    assert.equal(d.code, 552, d.text);
    // the session is still usable
    await client.cmd('RSET');
    assert.equal((await client.cmd('MAIL FROM:<big@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<oversize@ephemail.test>')).code, 250);
    assert.equal((await client.data(toWire(message({ From: 'big@example.org', Subject: 'small' }, 'ok')))).code, 250);
    await client.quit();
    const list = await listAll(svc.api, 'oversize@ephemail.test');
    assert.deepEqual(list.map((e) => e.subject), ['small']);
  });

  test('mailed_by from MAIL FROM (lowercased), null for MAIL FROM:<>', async () => {
    await sendRaw(svc.smtpPort, { from: 'Bounce+123@Mailer.Example.COM', to: ['mb1@ephemail.test'], body: message({ From: 'Forged <ceo@bank.example>', Subject: 's' }, 'x') });
    const e1 = await only('mb1@ephemail.test');
    assert.equal(e1.mailed_by, 'mailer.example.com');
    assert.equal(e1.sender, 'Forged <ceo@bank.example>');
    await sendRaw(svc.smtpPort, { from: '', to: ['mb2@ephemail.test'], body: message({ From: 'MAILER-DAEMON@x.example', Subject: 'bounce' }, 'x') });
    const e2 = await only('mb2@ephemail.test');
    assert.equal(e2.mailed_by, null);
    const summary = (await listAll(svc.api, 'mb2@ephemail.test'))[0];
    assert.equal(summary.mailed_by, null);
  });

  test('text-only → html_body null; alternative → both bodies, attachments not in the body', async () => {
    await svc.send({ to: 'textonly@ephemail.test', subject: 't', text: 'only text' });
    const t = await only('textonly@ephemail.test');
    assert.equal(t.text_body.trim(), 'only text');
    assert.equal(t.html_body, null);
    await svc.send({ to: 'both@ephemail.test', subject: 'b', text: 'the text', html: '<b>the html</b>', attachments: [{ filename: 'x.txt', content: 'ATTACHED-ONLY' }] });
    const b = await only('both@ephemail.test');
    assert.equal(b.text_body.trim(), 'the text');
    assert.equal(b.html_body.trim(), '<b>the html</b>');
    assert.doesNotMatch(`${b.text_body}${b.html_body}`, /ATTACHED-ONLY/);
  });

  test('missing From and Subject → "" (not null)', async () => {
    await sendRaw(svc.smtpPort, { from: 'a@example.org', to: ['bare@ephemail.test'], body: 'X-Nothing: here\r\n\r\njust text' });
    const e = await only('bare@ephemail.test');
    assert.equal(e.sender, '');
    assert.equal(e.subject, '');
    assert.equal(e.to, '');
    assert.equal(e.cc, '');
    assert.equal(e.message_id, null);
    assert.equal(e.html_body, null);
    assert.equal(e.text_body.trim(), 'just text');
  });

  test('8-bit body and raw UTF-8 headers (SMTPUTF8)', async () => {
    const body = Buffer.from('From: Jürgen <j@example.org>\r\nSubject: Grüße aus Köln\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nSchöne Grüße\r\n', 'utf8');
    const r = await sendRaw(svc.smtpPort, { from: 'j@example.org', to: ['utf8@ephemail.test'], body, mailParams: 'BODY=8BITMIME SMTPUTF8' });
    assert.equal(r.mail.code, 250);
    assert.equal(r.data?.code, 250);
    const e = await only('utf8@ephemail.test');
    assert.equal(e.subject, 'Grüße aus Köln');
    assert.equal(e.sender, 'Jürgen <j@example.org>');
    assert.equal(e.text_body.trim(), 'Schöne Grüße');
  });
});

describe('addresses and counts', () => {
  test('a UTF-8 local part (SMTPUTF8) is served under its NFC lowercase form', async () => {
    const r = await sendRaw(svc.smtpPort, { from: 'a@b.example', to: ['Jörg@ephemail.test'], body: message({ From: 'a@b.example', Subject: 'u' }, 'x'), mailParams: 'SMTPUTF8' });
    assert.equal(r.data?.code, 250);
    for (const form of ['jörg@ephemail.test', 'JÖRG@ephemail.test', 'jo\u0308rg@ephemail.test']) {
      const list = await listAll(svc.api, form);
      assert.equal(list.length, 1, form);
      assert.equal(list[0].address, 'jörg@ephemail.test');
    }
  });

  test('every local part SMTP accepts can be named in the API path (URL-encoded)', async () => {
    for (const lp of ['a/b', 'a%b', 'a?b', 'a#b', 'a&b', '{x}', "o'neil", 'a=b', '~u', '|x|', 'a`b', 'x^y', 'a*b', 'a!b', 'a$b']) {
      const address = `${lp}@ephemail.test`;
      const r = await sendRaw(svc.smtpPort, { from: 'a@b.example', to: [address], body: message({ Subject: lp }, 'x') });
      assert.equal(r.rcpt[0].code, 250, address);
      const list = await listAll(svc.api, address);
      assert.equal(list.length, 1, address);
      assert.equal(list[0].address, address);
      const del = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`, { method: 'DELETE' });
      assert.deepEqual((await del.json()).data, { address, deleted: 1 });
    }
  });

  test('at most 100 attachments are stored per email; the email is kept', async () => {
    await svc.send({ to: 'many-att@ephemail.test', subject: 'many', text: 'x', attachments: Array.from({ length: 105 }, (_, i) => ({ filename: `f${i}.txt`, content: `c${i}` })) });
    const e = await only('many-att@ephemail.test');
    assert.equal(e.attachments.length, 100);
    assert.deepEqual(e.attachments.map((a: any) => a.filename), Array.from({ length: 100 }, (_, i) => `f${i}.txt`));
  });
});

describe('attachments at the 5 MB boundary', () => {
  test('5,242,880 bytes kept, 5,242,881 dropped, the rest of the email kept', async () => {
    const exact = Buffer.alloc(5_242_880, 0x61);
    const over = Buffer.alloc(5_242_881, 0x62);
    exact[0] = 0x00;
    exact[exact.length - 1] = 0xff;
    await svc.send({
      to: 'big-att@ephemail.test',
      subject: 'two big ones',
      text: 'body survives',
      attachments: [
        { filename: 'exact.bin', content: exact, contentType: 'application/octet-stream' },
        { filename: 'over.bin', content: over, contentType: 'application/octet-stream' },
        { filename: 'small.txt', content: 'small' },
      ],
    });
    const e = await only('big-att@ephemail.test');
    assert.equal(e.subject, 'two big ones');
    assert.equal(e.text_body.trim(), 'body survives');
    assert.deepEqual(e.attachments.map((a: any) => [a.filename, a.size_bytes]), [['exact.bin', 5_242_880], ['small.txt', 5]]);
    const url = e.attachments[0].download_url.replace(/^https?:\/\/[^/]+/, svc.http);
    const res = await fetch(url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), '5242880');
    const got = Buffer.from(await res.arrayBuffer());
    assert.equal(got.length, 5_242_880);
    assert.ok(got.equals(exact), 'downloaded bytes equal the sent bytes');
  });

  test('an email whose only attachment is dropped has has_attachments false', async () => {
    await svc.send({ to: 'dropped@ephemail.test', subject: 'x', text: 't', attachments: [{ filename: 'over.bin', content: Buffer.alloc(5_242_881) }] });
    const e = await only('dropped@ephemail.test');
    assert.deepEqual(e.attachments, []);
    assert.equal(e.has_attachments, false);
    assert.equal((await listAll(svc.api, 'dropped@ephemail.test'))[0].has_attachments, false);
  });
});

describe('HTML and header decoding', () => {
  test('html_body has no script/iframe/object/embed/form, no on* attributes, no javascript: URLs', async () => {
    const html = `<html><body>
<p id="safe-marker">keep me</p>
<script>alert(1)</script><SCRIPT SRC="https://evil.example/x.js"></SCRIPT>
<iframe src="https://evil.example"></iframe><object data="x.swf"></object><embed src="x.swf">
<form action="https://evil.example/steal"><input name="pw"><button>go</button></form>
<img src="https://img.example/a.png" onerror="alert(2)" ONLOAD = "x()">
<a href="javascript:alert(3)">js link</a><a href=" JaVaScRiPt:alert(4)">js2</a><a href="jav&#x09;ascript:alert(5)">js3</a>
<a href="https://ok.example/path">ok link</a>
<div onclick="x()" onmouseover='y()'>div</div><svg onload="alert(6)"><circle/></svg>
<body onload="z()"><p style="color:red">styled</p>
</body></html>`;
    await svc.send({ to: 'xss@ephemail.test', subject: 'xss', html });
    const e = await only('xss@ephemail.test');
    const h: string = e.html_body;
    assert.ok(h, 'html kept');
    assert.equal(e.text_body, null, 'HTML-only message has text_body null');
    for (const bad of [/<script/i, /<iframe/i, /<object/i, /<embed/i, /<form/i, /\son[a-z]+\s*=/i, /javascript:/i, /alert\(/]) {
      assert.doesNotMatch(h, bad, `${bad} gone from ${h}`);
    }
    assert.match(h, /keep me/);
    assert.match(h, /https:\/\/ok\.example\/path/);
    assert.match(h, /styled/);
  });

  test('sender and subject RFC 2047 decoded (Q and B, mixed with plain text, folded)', async () => {
    const body = [
      'From: =?UTF-8?B?5bGx55Sw?= =?ISO-8859-1?Q?J=F6rg?= <jorg@example.de>',
      'To: =?UTF-8?Q?R=C3=A9mi?= <remi@ephemail.test>',
      'Cc: plain@example.org',
      'Subject: =?UTF-8?Q?Caf=C3=A9_?=',
      ' =?UTF-8?B?4pyT?= ordered',
      'Message-ID: <id-42@example.de>',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'x',
    ].join('\r\n');
    await sendRaw(svc.smtpPort, { from: 'jorg@example.de', to: ['decode@ephemail.test'], body });
    const e = await only('decode@ephemail.test');
    assert.equal(e.sender, '山田Jörg <jorg@example.de>');
    assert.equal(e.subject, 'Café ✓ ordered');
    assert.equal(e.to, 'Rémi <remi@ephemail.test>');
    assert.equal(e.cc, 'plain@example.org');
    assert.equal(e.message_id, '<id-42@example.de>');
    const names = e.headers.map((x: any) => x.name.toLowerCase());
    assert.deepEqual(names.slice(0, 6), ['from', 'to', 'cc', 'subject', 'message-id', 'content-type'], 'headers in the order received');
    const list = await listAll(svc.api, 'decode@ephemail.test');
    assert.equal(list[0].subject, 'Café ✓ ordered');
    assert.equal(list[0].sender, '山田Jörg <jorg@example.de>');
  });

  test('sender is the From header as received: nothing but encoded words changes', async () => {
    const from = '"Doe, John" (the boss)   <john.doe@example.org>';
    await sendRaw(svc.smtpPort, { from: 'x@example.org', to: ['asis@ephemail.test'], body: message({ From: from, Subject: 'spaced  subject (with [brackets])' }, 'x') });
    const e = await only('asis@ephemail.test');
    assert.equal(e.sender, from);
    // whitespace inside the value is kept; the space after the colon is not part of the value
    assert.equal(e.subject, 'spaced  subject (with [brackets])');
  });
});
