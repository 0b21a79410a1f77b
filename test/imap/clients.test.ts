// IMAP and POP3 with other real clients over real sockets: Python's imaplib and poplib
// (/usr/bin/python3) and curl (imap://, pop3://). Each reads what the API serves: the bytes of
// RETR / BODY[] are /raw's; POP3 DELE applied at QUIT is gone from the API.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

const run = promisify(execFile);
const PYTHON = process.env.EPHEMAIL_PYTHON || '/usr/bin/python3';
let svc: TestService;

before(async () => {
  svc = await startService();
});
after(async () => {
  await svc.stop();
});

async function py(script: string, ...args: string[]): Promise<unknown> {
  const { stdout } = await run(PYTHON, ['-c', script, ...args], { timeout: 30_000 });
  return JSON.parse(stdout);
}

async function rawOf(address: string, index: number): Promise<Buffer> {
  const list = (await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { id: string }[] };
  const id = list.data.reverse()[index].id;
  return Buffer.from(await (await svc.api(`/api/v1/emails/${id}/raw`)).arrayBuffer());
}

test('imaplib: login, list, select, fetch whole and partial, search by subject and since, store + expunge', async () => {
  const address = 'python@ephemail.test';
  await svc.send({ to: address, subject: 'Alpha', text: 'first body' });
  await svc.send({ to: address, subject: 'Beta', text: 'second body' });
  const raw = await rawOf(address, 0);
  const out = (await py(`
import imaplib, json, sys, base64, datetime
port, user = int(sys.argv[1]), sys.argv[2]
m = imaplib.IMAP4('127.0.0.1', port)
out = {}
out['login'] = m.login(user, 'whatever')[0]
out['list'] = [x.decode() for x in m.list()[1]]
typ, data = m.select('INBOX')
out['exists'] = int(data[0])
typ, data = m.fetch('1', '(RFC822)')
out['whole'] = base64.b64encode(data[0][1]).decode()
typ, data = m.fetch('1', '(BODY.PEEK[]<0.16>)')
out['partial'] = base64.b64encode(data[0][1]).decode()
out['subject'] = m.search(None, 'SUBJECT', '"beta"')[1][0].decode()
today = datetime.date.today() - datetime.timedelta(days=1)
out['since'] = m.search(None, 'SINCE', today.strftime('%d-%b-%Y'))[1][0].decode()
out['uidsearch'] = m.uid('SEARCH', None, 'ALL')[1][0].decode()
m.store('1', '+FLAGS', '\\\\Deleted')
typ, data = m.expunge()
out['expunged'] = [x.decode() for x in data if x]
out['bad'] = None
try:
    m.fetch('1', '(NOSUCHITEM)')
except imaplib.IMAP4.error as e:
    out['bad'] = str(e)[:40]
m.logout()
print(json.dumps(out))
`, String(svc.imapPort), address)) as Record<string, unknown>;
  assert.equal(out.login, 'OK');
  assert.deepEqual(out.list, ['(\\HasNoChildren) "/" INBOX']);
  assert.equal(out.exists, 2);
  assert.ok(Buffer.from(out.whole as string, 'base64').equals(raw), 'RFC822 is /raw');
  assert.ok(Buffer.from(out.partial as string, 'base64').equals(raw.subarray(0, 16)));
  assert.equal(out.subject, '2');
  assert.equal(out.since, '1 2');
  assert.equal(out.uidsearch, '1 2');
  assert.deepEqual(out.expunged, ['1']);
  assert.match(String(out.bad), /FETCH|Unknown/);
  const left = (await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { subject: string }[] };
  assert.deepEqual(left.data.map((e) => e.subject), ['Beta']);
});

test('poplib: STAT, LIST, UIDL (the email id), RETR, TOP, DELE applied at QUIT', async () => {
  const address = 'pop@ephemail.test';
  await svc.send({ to: address, subject: 'Pop one', text: 'line1\r\nline2\r\nline3\r\n.starts with a dot\r\n' });
  await svc.send({ to: address, subject: 'Pop two', text: 'other' });
  const list = (await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { id: string }[] };
  const ids = list.data.map((e) => e.id).reverse();
  const raw = await rawOf(address, 0);
  const out = (await py(`
import poplib, json, sys, base64
port, user = int(sys.argv[1]), sys.argv[2]
p = poplib.POP3('127.0.0.1', port)
out = {}
out['capa'] = sorted(p.capa().keys())
p.user(user)
out['pass'] = p.pass_('x').decode()
out['stat'] = list(p.stat())
out['list'] = [x.decode() for x in p.list()[1]]
out['uidl'] = [x.decode() for x in p.uidl()[1]]
out['retr'] = base64.b64encode(b'\\r\\n'.join(p.retr(1)[1]) + b'\\r\\n').decode()
top = p.top(1, 1)[1]
out['top'] = [x.decode() for x in top]
out['dele'] = p.dele(1).decode()
out['quit'] = p.quit().decode()
print(json.dumps(out))
`, String(svc.pop3Port), address)) as Record<string, unknown>;
  assert.ok((out.capa as string[]).includes('UIDL') && (out.capa as string[]).includes('TOP'));
  assert.match(String(out.pass), /^\+OK/);
  assert.equal((out.stat as number[])[0], 2);
  assert.deepEqual(out.uidl, [`1 ${ids[0]}`, `2 ${ids[1]}`]);
  assert.equal((out.list as string[])[0], `1 ${raw.length}`);
  assert.ok(Buffer.from(out.retr as string, 'base64').equals(raw), 'RETR is /raw (dot-stuffing undone by poplib)');
  const top = out.top as string[];
  const blank = top.indexOf('');
  assert.ok(blank > 0, 'TOP: the header, a blank line');
  assert.equal(top.length - blank - 1, 1, 'and one body line');
  assert.match(String(out.quit), /^\+OK/);
  const left = (await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json()) as { data: { id: string }[] };
  assert.deepEqual(left.data.map((e) => e.id), [ids[1]]);
});

test('curl imap:// and pop3://: fetch by UID, search, RETR and LIST', async () => {
  const address = 'curl@ephemail.test';
  await svc.send({ to: address, subject: 'Curl me', text: 'hello curl' });
  const raw = await rawOf(address, 0);
  const user = `${address}:secret`;
  const fetched = await run('curl', ['-s', '--max-time', '20', '-u', user, `imap://127.0.0.1:${svc.imapPort}/INBOX;UID=1`], { encoding: 'buffer' });
  assert.ok(fetched.stdout.equals(raw), 'curl imap:// UID=1 is /raw');
  const search = await run('curl', ['-s', '--max-time', '20', '-u', user, `imap://127.0.0.1:${svc.imapPort}/INBOX`, '-X', 'SEARCH SUBJECT "curl"']);
  assert.match(search.stdout, /^\* SEARCH 1\r?$/m);
  const list = await run('curl', ['-s', '--max-time', '20', '-u', user, `pop3://127.0.0.1:${svc.pop3Port}/`]);
  assert.equal(list.stdout.trim(), `1 ${raw.length}`);
  const retr = await run('curl', ['-s', '--max-time', '20', '-u', user, `pop3://127.0.0.1:${svc.pop3Port}/1`], { encoding: 'buffer' });
  assert.ok(retr.stdout.equals(raw), 'curl pop3:// RETR is /raw');
});

test('GET /api/v1 lists the IMAP and POP3 endpoints', async () => {
  const d = ((await (await svc.api('/api/v1')).json()) as { data: { mail_access: { imap: { host: string; port: number; starttls: boolean }; pop3: { port: number } } } }).data;
  assert.deepEqual(d.mail_access.imap, { host: 'localhost', port: svc.imapPort, starttls: false });
  assert.equal(d.mail_access.pop3.port, svc.pop3Port);
  const metrics = await (await svc.api('/metrics')).text();
  assert.match(metrics, /^ephemail_mail_access_sessions_total\{protocol="imap"\} [1-9]/m);
  assert.match(metrics, /^ephemail_mail_access_commands_total\{protocol="imap",command="FETCH"\} [1-9]/m);
  assert.match(metrics, /^ephemail_mail_access_commands_total\{protocol="pop3",command="RETR"\} [1-9]/m);
});

test('the inbox page shows "Open in a mail client" with the IMAP and POP3 server, port and user name', async () => {
  const html = await (await svc.api('/inbox/page@ephemail.test')).text();
  assert.match(html, /<summary>Open in a mail client<\/summary>/);
  assert.match(html, new RegExp(`<dt>IMAP</dt><dd>server <code>localhost</code>, port <code>${svc.imapPort}</code>, no encryption</dd>`));
  assert.match(html, new RegExp(`<dt>POP3</dt><dd>server <code>localhost</code>, port <code>${svc.pop3Port}</code>`));
  assert.match(html, /<dt>User name<\/dt><dd><code>page@ephemail.test<\/code><\/dd>/);
});

test('a client that sends its commands and half-closes (nc, scripts) still gets every answer', async () => {
  const { connect } = await import('node:net');
  await svc.send({ to: 'half@ephemail.test', subject: 'x', text: 'y' });
  for (const [port, payload, last] of [
    [svc.imapPort, 'a LOGIN half@ephemail.test x\r\nb SELECT INBOX\r\nc FETCH 1 (FLAGS)\r\n', /^c OK FETCH completed$/m],
    [svc.pop3Port, 'USER half@ephemail.test\r\nPASS x\r\nSTAT\r\n', /^\+OK 1 \d+$/m],
  ] as const) {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => (out += d));
    s.end(payload);
    await new Promise((r) => s.on('close', r));
    assert.match(out.replace(/\r/g, ''), last);
  }
});
