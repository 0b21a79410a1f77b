// IMAP with a real client (imapflow) over a real socket against the in-process service: log in,
// list, fetch whole and partial bodies, BODYSTRUCTURE of a multipart message with an attachment as
// imapflow parses it, SEARCH by subject and since a date, IDLE woken by SMTP mail, \Deleted +
// EXPUNGE gone from the API, a key as password and a wrong key refused, receive-only refusals.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ImapFlow } from 'imapflow';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
const ADDRESS = 'reader@ephemail.test';

before(async () => {
  svc = await startService();
  await svc.send({ to: ADDRESS, subject: 'First hello', text: 'one two three\r\nfour five six\r\n' });
  await svc.send({
    to: ADDRESS,
    subject: 'With attachment',
    text: 'see the file',
    html: '<p>see the <b>file</b></p>',
    attachments: [{ filename: 'report.pdf', content: Buffer.from('%PDF-1.4 fake pdf bytes'), contentType: 'application/pdf' }],
  });
  await svc.send({ to: ADDRESS, subject: 'Third message', text: 'last one' });
});
after(async () => {
  await svc.stop();
});

const client = (user = ADDRESS, pass = 'anything') =>
  new ImapFlow({ host: '127.0.0.1', port: svc.imapPort, secure: false, auth: { user, pass }, logger: false, disableAutoIdle: true, emitLogs: false });

async function rawOf(id: string): Promise<Buffer> {
  const r = await svc.api(`/api/v1/emails/${id}/raw`);
  assert.equal(r.status, 200);
  return Buffer.from(await r.arrayBuffer());
}

async function ids(): Promise<string[]> {
  const r = await svc.api(`/api/v1/inboxes/${ADDRESS}/emails?limit=100`);
  const body = (await r.json()) as { data: { id: string }[] };
  return body.data.map((e) => e.id).reverse(); // oldest first
}

test('log in, list, select: INBOX with the three messages, UIDs 1..3', async () => {
  const c = client();
  await c.connect();
  try {
    const boxes = await c.list();
    assert.deepEqual(boxes.map((b) => b.path), ['INBOX']);
    const box = await c.mailboxOpen('INBOX');
    assert.equal(box.exists, 3);
    assert.ok(Number(box.uidValidity) > 0);
    assert.equal(Number(box.uidNext), 4);
    const uids: number[] = [];
    for await (const m of c.fetch('1:*', { uid: true, envelope: true, internalDate: true, size: true, flags: true })) uids.push(m.uid);
    assert.deepEqual(uids, [1, 2, 3]);
  } finally {
    await c.logout();
  }
});

test('BODY[] is exactly /raw; partial, HEADER.FIELDS, TEXT and part numbers', async () => {
  const [first, second] = await ids();
  const c = client();
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    const whole = await c.fetchOne('1', { source: true, size: true });
    assert.ok(whole);
    const raw = await rawOf(first);
    assert.ok(whole.source!.equals(raw), 'BODY[] equals /raw');
    assert.equal(whole.size, raw.length);
    const partial = await c.fetchOne('1', { source: { start: 10, maxLength: 20 } });
    assert.ok(partial && partial.source!.equals(raw.subarray(10, 30)), 'partial <10.20>');
    const headers = await c.fetchOne('1', { headers: ['subject', 'to'] });
    assert.ok(headers);
    assert.match(headers.headers!.toString(), /^Subject: First hello\r\n/im);
    assert.doesNotMatch(headers.headers!.toString(), /^From:/im);
    const raw2 = await rawOf(second);
    const parts = await c.fetchOne('2', { bodyParts: ['1', '2', 'TEXT'] });
    assert.ok(parts && parts.bodyParts);
    const text = parts.bodyParts.get('text')!.toString();
    assert.ok(raw2.toString().endsWith(text), 'TEXT is the body after the header');
    assert.ok(parts.bodyParts.get('2')!.toString().replace(/\s/g, '').length > 0);
  } finally {
    await c.logout();
  }
});

test('BODYSTRUCTURE of a multipart message with an attachment, as imapflow parses it', async () => {
  const c = client();
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    const m = await c.fetchOne('2', { bodyStructure: true, envelope: true });
    assert.ok(m && m.bodyStructure);
    const bs = m.bodyStructure;
    assert.equal(bs.type, 'multipart/mixed');
    const kids = bs.childNodes!;
    assert.equal(kids.length, 2);
    assert.equal(kids[0].type, 'multipart/alternative');
    assert.deepEqual(kids[0].childNodes!.map((k) => [k.part, k.type]), [['1.1', 'text/plain'], ['1.2', 'text/html']]);
    const att = kids[1];
    assert.equal(att.part, '2');
    assert.equal(att.type, 'application/pdf');
    assert.equal(att.disposition, 'attachment');
    assert.equal(att.dispositionParameters?.filename, 'report.pdf');
    assert.equal(att.encoding, 'base64');
    // the attachment part decoded by imapflow's download is the file
    const dl = await c.download('2', '2');
    const chunks: Buffer[] = [];
    for await (const ch of dl.content!) chunks.push(ch as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), '%PDF-1.4 fake pdf bytes');
    assert.equal(m.envelope!.subject, 'With attachment');
    assert.deepEqual(m.envelope!.to!.map((a) => a.address), [ADDRESS]);
    assert.equal(m.envelope!.from![0].address, 'sender@example.org');
  } finally {
    await c.logout();
  }
});

test('SEARCH by subject and since a date (UID SEARCH too)', async () => {
  const c = client();
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    assert.deepEqual(await c.search({ subject: 'attachment' }), [2]);
    assert.deepEqual(await c.search({ subject: 'attachment' }, { uid: true }), [2]);
    const yesterday = new Date(Date.now() - 86_400_000);
    assert.deepEqual(await c.search({ since: yesterday }), [1, 2, 3]);
    const tomorrow = new Date(Date.now() + 2 * 86_400_000);
    assert.deepEqual(await c.search({ since: tomorrow }), []);
    assert.deepEqual(await c.search({ or: [{ subject: 'first' }, { subject: 'third' }] }), [1, 3]);
    assert.deepEqual(await c.search({ body: 'four five' }), [1]);
    assert.deepEqual(await c.search({ seen: false }), [1, 2, 3]);
  } finally {
    await c.logout();
  }
});

test('IDLE is woken by SMTP mail within a second: * n EXISTS', async () => {
  const address = 'idler@ephemail.test';
  const c = client(address);
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    let exists = 0;
    c.on('exists', (d: { count: number }) => (exists = d.count));
    const idling = c.idle();
    await until(() => c.idling, 'imapflow idles');
    const sent = performance.now();
    await svc.send({ to: address, subject: 'wake up', text: 'x' });
    await until(() => exists === 1, 'EXISTS during IDLE', 1000);
    assert.ok(performance.now() - sent < 1000); // bound: the contract, EXISTS within 1 s of the 250
    await c.noop(); // ends IDLE
    await idling;
  } finally {
    await c.logout();
  }
});

test('\\Deleted + EXPUNGE deletes the email: gone from the API', async () => {
  const address = 'deleter@ephemail.test';
  await svc.send({ to: address, subject: 'delete me', text: 'x' });
  await svc.send({ to: address, subject: 'keep me', text: 'y' });
  const list = async () => ((await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { subject: string }[] }).data.map((e) => e.subject);
  const c = client(address);
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    await c.messageFlagsAdd('1', ['\\Deleted']);
    const flagged = await c.fetchOne('1', { flags: true });
    assert.ok(flagged && flagged.flags!.has('\\Deleted'));
    await c.messageDelete('1'); // STORE \Deleted + UID EXPUNGE
    assert.deepEqual(await list(), ['keep me']);
    const status = await c.status('INBOX', { messages: true });
    assert.ok(status && status.messages === 1);
  } finally {
    await c.logout();
  }
});

test('an API key as password; a wrong key refused with AUTHENTICATIONFAILED; receive-only', async () => {
  const minted = (await (await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { data: { api_key: string } };
  const key = minted.data.api_key;
  assert.match(key, /^eph_/);
  const usedByKey = async () => ((await (await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { usage: { requests_this_minute: number } } }).data.usage.requests_this_minute;
  const before = await usedByKey();
  const good = client(ADDRESS, key);
  await good.connect();
  try {
    // the login, then the SELECT, counted in the key's bucket (/me counts nothing)
    assert.equal(await usedByKey(), before + 1);
    const box = await good.mailboxOpen('INBOX');
    assert.equal(await usedByKey(), before + 2);
    assert.ok(box.exists >= 3);
    await assert.rejects(good.mailboxCreate('Archive'));
    assert.equal(await good.messageCopy('1', 'Archive'), false, 'COPY answered NO (imapflow gives false)');
  } finally {
    await good.logout();
  }
  const bad = client(ADDRESS, 'eph_notARealKeyAtAll0000000000000000');
  await assert.rejects(bad.connect(), (err: Error & { authenticationFailed?: boolean; serverResponseCode?: string }) => {
    assert.equal(err.authenticationFailed, true);
    assert.equal(err.serverResponseCode, 'AUTHENTICATIONFAILED');
    return true;
  });
  const unknownDomain = client('someone@not-served.example');
  await assert.rejects(unknownDomain.connect());
});

test('mail deleted through the API is announced as * n EXPUNGE at NOOP; new mail as EXISTS', async () => {
  const address = 'elsewhere@ephemail.test';
  await svc.send({ to: address, subject: 'gone soon', text: 'x' });
  await svc.send({ to: address, subject: 'stays', text: 'y' });
  const c = client(address);
  await c.connect();
  try {
    await c.mailboxOpen('INBOX');
    const expunged: number[] = [];
    c.on('expunge', (d: { seq: number }) => expunged.push(d.seq));
    const list = ((await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { id: string; subject: string }[] }).data;
    const gone = list.find((e) => e.subject === 'gone soon')!;
    assert.equal((await svc.api(`/api/v1/emails/${gone.id}`, { method: 'DELETE' })).status, 204);
    await svc.send({ to: address, subject: 'new', text: 'z' });
    await c.noop();
    assert.deepEqual(expunged, [1]);
    const subjects: string[] = [];
    for await (const m of c.fetch('1:*', { envelope: true, uid: true })) subjects.push(`${m.uid}:${m.envelope!.subject}`);
    assert.deepEqual(subjects, ['2:stays', '3:new']);
  } finally {
    await c.logout();
  }
});
