// STARTTLS (IMAP) and STLS (POP3) with the SMTP certificate (EPHEMAIL_SMTP_TLS_CERT/_KEY, a
// self-signed pair made here): before the upgrade, plaintext login is refused (LOGINDISABLED,
// `-ERR [AUTH]`); after it, imapflow and poplib log in, and the certificate is the operator's.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { ImapFlow } from 'imapflow';
import selfsigned from 'selfsigned';
import { startService, type TestService } from '../helpers/service.ts';

const run = promisify(execFile);
let svc: TestService;
let dir: string;
let fingerprint: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ephemail-imap-tls-'));
  const gen = selfsigned.generate as unknown as (attrs: { name: string; value: string }[], opts: Record<string, unknown>) => Promise<{ private: string; cert: string }>;
  const pems = await gen([{ name: 'commonName', value: 'ephemail.test' }], { days: 30, keySize: 2048, algorithm: 'sha256' });
  writeFileSync(join(dir, 'cert.pem'), pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  fingerprint = new X509Certificate(pems.cert).fingerprint256;
  svc = await startService({ EPHEMAIL_SMTP_TLS_CERT: join(dir, 'cert.pem'), EPHEMAIL_SMTP_TLS_KEY: join(dir, 'key.pem') });
  await svc.send({ to: 'tls@ephemail.test', subject: 'Secret', text: 'over tls' });
});
after(async () => {
  await svc.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A line-by-line conversation on a plain socket. */
function talk(port: number) {
  const s: Socket = connect(port, '127.0.0.1');
  let buf = '';
  const waiters: (() => void)[] = [];
  s.on('data', (d) => {
    buf += d.toString();
    waiters.splice(0).forEach((w) => w());
  });
  const until = async (re: RegExp) => {
    while (!re.test(buf)) await new Promise<void>((r) => waiters.push(r));
    const out = buf;
    buf = '';
    return out;
  };
  return { s, until, send: (line: string) => s.write(line + '\r\n') };
}

test('IMAP: LOGINDISABLED and STARTTLS before the upgrade, LOGIN refused; imapflow logs in after STARTTLS with the operator certificate', async () => {
  const t = talk(svc.imapPort);
  const greeting = await t.until(/\r\n/);
  assert.match(greeting, /STARTTLS/);
  assert.match(greeting, /LOGINDISABLED/);
  assert.doesNotMatch(greeting, /AUTH=PLAIN/);
  t.send('a1 LOGIN tls@ephemail.test x');
  assert.match(await t.until(/^a1 /m), /^a1 NO /m);
  t.send('a2 STARTTLS');
  assert.match(await t.until(/^a2 /m), /^a2 OK/m);
  const secure = tlsConnect({ socket: t.s, rejectUnauthorized: false, servername: 'ephemail.test' });
  await new Promise((r) => secure.once('secureConnect', r));
  assert.equal(secure.getPeerX509Certificate()?.fingerprint256, fingerprint);
  secure.destroy();

  const c = new ImapFlow({ host: '127.0.0.1', port: svc.imapPort, secure: false, doSTARTTLS: true, tls: { rejectUnauthorized: false }, auth: { user: 'tls@ephemail.test', pass: 'x' }, logger: false });
  await c.connect();
  try {
    const box = await c.mailboxOpen('INBOX');
    assert.equal(box.exists, 1);
    const m = await c.fetchOne('1', { envelope: true });
    assert.ok(m && m.envelope);
    assert.equal(m.envelope.subject, 'Secret');
  } finally {
    await c.logout();
  }
});

test('POP3: USER refused before STLS; poplib logs in after STLS', async () => {
  const t = talk(svc.pop3Port);
  await t.until(/\r\n/);
  t.send('CAPA');
  assert.match(await t.until(/\r\n\.\r\n/), /^STLS\r$/m);
  t.send('USER tls@ephemail.test');
  assert.match(await t.until(/\r\n/), /^-ERR \[AUTH\]/);
  t.s.destroy();
  const { stdout } = await run('/usr/bin/python3', ['-c', `
import poplib, ssl, sys, json
p = poplib.POP3('127.0.0.1', int(sys.argv[1]))
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
p.stls(ctx)
p.user('tls@ephemail.test')
p.pass_('x')
print(json.dumps(list(p.stat())))
p.quit()
`, String(svc.pop3Port)], { timeout: 30_000 });
  assert.equal(JSON.parse(stdout)[0], 1);
});

test('new certificate files are taken by new STARTTLS sessions after a reload (SIGHUP): SMTP\'s one reload serves IMAP too', async () => {
  const gen = selfsigned.generate as unknown as (attrs: { name: string; value: string }[], opts: Record<string, unknown>) => Promise<{ private: string; cert: string }>;
  const pems = await gen([{ name: 'commonName', value: 'renewed.ephemail.test' }], { days: 30, keySize: 2048, algorithm: 'sha256' });
  writeFileSync(join(dir, 'cert.pem'), pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  const outcome = await svc.service.smtp.reloadTls('test');
  assert.ok(outcome === 'reloaded' || outcome === 'unchanged', outcome); // (the directory watch may have been first)
  const t = talk(svc.imapPort);
  await t.until(/\r\n/);
  t.send('a1 STARTTLS');
  await t.until(/^a1 OK/m);
  const secure = tlsConnect({ socket: t.s, rejectUnauthorized: false });
  await new Promise((r) => secure.once('secureConnect', r));
  assert.equal(secure.getPeerX509Certificate()?.fingerprint256, new X509Certificate(pems.cert).fingerprint256);
  secure.destroy();
});

test('EPHEMAIL_SMTP_TLS=self-signed: STARTTLS with a certificate made at start for the domains', async () => {
  const own = await startService({ EPHEMAIL_SMTP_TLS: 'self-signed' });
  try {
    const t = talk(own.imapPort);
    assert.match(await t.until(/\r\n/), /STARTTLS LOGINDISABLED/);
    t.send('a1 STARTTLS');
    await t.until(/^a1 OK/m);
    const secure = tlsConnect({ socket: t.s, rejectUnauthorized: false });
    await new Promise((r) => secure.once('secureConnect', r));
    assert.match(secure.getPeerX509Certificate()?.subject ?? '', /CN=ephemail\.test/);
    let answer = '';
    secure.on('data', (d) => (answer += d));
    secure.write('a2 CAPABILITY\r\n');
    while (!/^a2 OK/m.test(answer)) await new Promise((r) => secure.once('data', r));
    assert.match(answer, /AUTH=PLAIN/);
    assert.doesNotMatch(answer, /LOGINDISABLED/);
    secure.destroy();
  } finally {
    await own.stop();
  }
});
