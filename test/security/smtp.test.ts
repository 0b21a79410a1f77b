// Hostile SMTP sessions against the real receiver: every case gets its documented
// reply (docs/security.md) and nothing unstored is ever acknowledged with 250.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { createSmtpReceiver, type SmtpListener } from '../../src/smtp/server.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, message, sendRaw, toWire } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const D = 'ephemail.test';

async function listEmails(svc: TestService, address: string): Promise<any[]> {
  const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100`);
  assert.equal(res.status, 200);
  return (await res.json()).data;
}

/** Emails in the service's SQLite file, read through a second connection. */
async function countStored(svc: TestService): Promise<number> {
  const db = new Database(svc.service.core.config.store.slice('sqlite:'.length), { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM emails').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

async function open(port: number) {
  const { client, greeting } = await SmtpClient.open(port);
  assert.equal(greeting.code, 220);
  const ehlo = await client.cmd('EHLO hostile.example');
  assert.equal(ehlo.code, 250);
  return { client, ehlo };
}

describe('SMTP hostile input', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_MAX_MESSAGE_BYTES: String(2 * 1024 * 1024) }, { mounts: [] });
  });
  after(async () => svc.stop());

  test('AUTH is not offered and anonymous senders are never asked to authenticate (no 530)', async () => {
    const { client, ehlo } = await open(svc.smtpPort);
    assert.ok(!ehlo.lines.some((l) => /^AUTH\b/i.test(l)), ehlo.text);
    assert.ok(ehlo.lines.some((l) => /^SIZE \d+$/.test(l)), 'SIZE is advertised');
    const auth = await client.cmd('AUTH PLAIN AGxvZ2luAHBhc3N3b3Jk');
    assert.notEqual(auth.code, 235);
    assert.notEqual(auth.code, 530);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<anon@${D}>`)).code, 250);
    await client.quit();
  });

  test('a client that talks before the greeting gets 421 and is closed', async () => {
    const { connect } = await import('node:net');
    const socket = connect({ port: svc.smtpPort, host: '127.0.0.1' });
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (got += d));
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write('EHLO early.example\r\n');
    await new Promise<void>((r) => socket.once('close', () => r()));
    assert.match(got, /^421 /m, got);
    assert.doesNotMatch(got, /^250/m, 'the early command is not served');
  });

  test('SIZE over the limit is refused at MAIL FROM with 552 5.3.4', async () => {
    const { client } = await open(svc.smtpPort);
    const r = await client.cmd(`MAIL FROM:<a@example.org> SIZE=${2 * 1024 * 1024 + 1}`);
    assert.equal(r.code, 552);
    assert.match(r.text, /^5\.3\.4 /);
    assert.equal((await client.cmd('RSET')).code, 250);
    await client.quit();
  });

  test('oversize DATA is counted while streamed, answered 552 and nothing is stored', async () => {
    const before = await countStored(svc);
    const body = Buffer.alloc(3 * 1024 * 1024, 'x\r\n'.repeat(1));
    const wire = Buffer.concat([Buffer.from(message({ From: 'a@example.org', To: `big@${D}`, Subject: 'big' }, '')), toWire(body)]);
    const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`big@${D}`], body: wire });
    assert.equal(r.data?.code, 552, r.data?.text);
    assert.match(r.data!.text, /^5\.3\.4 /);
    assert.equal(await countStored(svc), before);
    assert.equal((await listEmails(svc, `big@${D}`)).length, 0);
  });

  test('one 50 MB line without a newline gets 552 soon after the limit and the connection is closed, nothing stored (issue 34: the rest is not read)', async () => {
    const beforeN = await countStored(svc);
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<line@${D}>`)).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    const reply = client.read(60_000);
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    let written = 0;
    for (let i = 0; i < 50 && !client.closed; i++) {
      written += chunk.length;
      // the server stops reading past the limit: a write then waits until the connection closes
      if (!client.socket.write(chunk)) await new Promise((r) => (client.socket.once('drain', r), client.socket.once('close', r)));
    }
    const r = await reply;
    assert.equal(r.code, 552, r.text);
    assert.match(r.text, /^5\.3\.4 .*closing connection/);
    assert.equal((await client.read(10_000)).code, 0, 'the connection is closed');
    assert.ok(written < 50 * 1024 * 1024, `the client wrote ${written} bytes: the server stopped reading before the end`);
    client.socket.destroy();
    assert.equal(await countStored(svc), beforeN);
    const mem = process.memoryUsage().rss;
    assert.ok(mem < 1024 * 1024 * 1024, `rss ${mem}`);
  });

  test('a 50 MB command line without a newline is cut off with 421 (command lines are capped)', async () => {
    const { client } = await open(svc.smtpPort);
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    let written = 0;
    for (let i = 0; i < 50 && !client.closed; i++) {
      client.socket.write(chunk);
      written++;
      await new Promise((r) => setImmediate(r));
    }
    const r = await client.read(20_000);
    assert.equal(r.code, 421, r.text);
    client.socket.destroy();
    assert.ok(written >= 1);
  });

  test('more than 100 recipients: the 101st and later get 452, the first 100 are delivered', async () => {
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    const codes: number[] = [];
    for (let i = 0; i < 105; i++) codes.push((await client.cmd(`RCPT TO:<r${i}@${D}>`)).code);
    assert.deepEqual(codes.slice(0, 100), Array(100).fill(250));
    assert.deepEqual(codes.slice(100), Array(5).fill(452));
    const r = await client.data(toWire(message({ From: 'a@example.org', To: `r0@${D}`, Subject: 'many' }, 'hi')));
    assert.equal(r.code, 250, r.text);
    await client.quit();
    assert.equal((await listEmails(svc, `r99@${D}`)).length, 1);
    assert.equal((await listEmails(svc, `r100@${D}`)).length, 0);
  });

  test('CR, LF or NUL inside an address gets 501', async () => {
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    for (const bad of [`a\u0000b@${D}`, `a\rb@${D}`]) {
      const r = await client.cmd(`RCPT TO:<${bad}>`);
      assert.equal(r.code, 501, `${JSON.stringify(bad)}: ${r.text}`);
    }
    // a bare LF ends the command line: what is left is a separate (unknown) command, never a recipient
    client.write(`RCPT TO:<a\nb@${D}>\r\n`);
    const first = await client.read();
    const second = await client.read();
    assert.ok(first.code >= 500 && second.code >= 500, `${first.text} / ${second.text}`);
    await client.quit();
    const { client: c2 } = await open(svc.smtpPort);
    const m = await c2.cmd('MAIL FROM:<a\u0000b@example.org>');
    assert.equal(m.code, 501, m.text);
    await c2.quit();
  });

  test('addresses the API could not name are refused at RCPT; an unknown domain gets 550 5.1.2', async () => {
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    const cases: [string, number][] = [
      [`"quoted local"@${D}`, 553],
      [`"q"@${D}`, 553],
      [`${'a'.repeat(65)}@${D}`, 553],
      [`a..b@${D}`, 553],
      [`.a@${D}`, 553],
      [`a\u200bb@${D}`, 553],
      ['someone@not-served.example', 550],
    ];
    for (const [addr, code] of cases) {
      const r = await client.cmd(`RCPT TO:<${addr}>`);
      assert.ok(r.code === code || (code === 553 && r.code === 501), `${addr}: ${r.code} ${r.text}`);
      if (code === 550) assert.match(r.text, /^5\.1\.2 /);
    }
    assert.equal((await client.cmd(`RCPT TO:<${'a'.repeat(64)}@${D}>`)).code, 250, '64 octets is fine');
    await client.quit();
  });

  test('a Unicode local part (SMTPUTF8) is accepted and the API names it in NFC', async () => {
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org> SMTPUTF8')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<Ju\u0308rgen@${D}>`)).code, 250, 'decomposed ü, capital J');
    const r = await client.data(toWire(message({ From: 'a@example.org', Subject: 'utf8' }, 'x')));
    assert.equal(r.code, 250, r.text);
    await client.quit();
    assert.equal((await listEmails(svc, `jürgen@${D}`)).length, 1);
  });

  test('bare-LF "\\n.\\n" smuggling yields exactly one message; only CRLF.CRLF ends DATA', async () => {
    const to = `smuggle@${D}`;
    const { client } = await open(svc.smtpPort);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    const smuggled = [
      `From: a@example.org\r\nTo: ${to}\r\nSubject: outer\r\n\r\nfirst part`,
      '\n.\nMAIL FROM:<evil@example.org>\nRCPT TO:<victim@ephemail.test>\nDATA\nSubject: smuggled-lf\n\nx\n.\n',
      '\r.\rMAIL FROM:<evil@example.org>\rRCPT TO:<victim@ephemail.test>\rDATA\rSubject: smuggled-cr\r\rx\r.\r',
      '\r\n.\nMAIL FROM:<evil@example.org>\r\nRCPT TO:<victim@ephemail.test>\r\nDATA\r\nSubject: smuggled-mixed\r\n\r\nx\r\n.\n',
      '\n.\r\nRSET\r\n',
      'tail\r\n.\r\n',
    ].join('');
    client.write(smuggled);
    const r = await client.read(20_000);
    assert.equal(r.code, 250, r.text);
    assert.equal((await client.cmd('NOOP')).code, 250, 'no pending replies: nothing else was parsed as a command');
    await client.quit();
    assert.equal((await listEmails(svc, to)).length, 1);
    assert.equal((await listEmails(svc, 'victim@ephemail.test')).length, 0);
  });
});

describe('SMTP connection limits', () => {
  let svc: TestService;
  let rx: SmtpListener;
  let port: number;
  before(async () => {
    svc = await startService({}, { mounts: [] });
    rx = createSmtpReceiver(svc.service.core, { maxPerIp: 3, maxClients: 5, sessionMs: 1500, idleMs: 60_000 });
    port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
  });
  after(async () => {
    await rx.close();
    await svc.stop();
  });

  test('a connection over the per-IP cap gets 421', async () => {
    const held = await Promise.all([0, 1, 2].map(() => SmtpClient.open(port)));
    for (const h of held) assert.equal(h.greeting.code, 220);
    const extra = await SmtpClient.open(port);
    assert.equal(extra.greeting.code, 421, extra.greeting.text);
    extra.client.socket.destroy();
    for (const h of held) await h.client.quit();
    // slots free up again once connections close
    await until(() => rx.server.connections.size === 0, 'the listener saw the connections close');
    const again = await SmtpClient.open(port);
    assert.equal(again.greeting.code, 220);
    await again.client.quit();
  });

  test('a sender trickling one byte at a time is closed with 421 at the session deadline', async () => {
    const { client, greeting } = await SmtpClient.open(port);
    assert.equal(greeting.code, 220);
    const started = Date.now();
    const trickle = setInterval(() => !client.closed && client.write('N'), 100);
    const r = await client.read(15_000);
    clearInterval(trickle);
    assert.equal(r.code, 421, r.text);
    assert.match(r.text, /4\.4\.2 Session time limit/);
    const elapsed = Date.now() - started;
    // bound: the 1.5 s session deadline is observed: lower bound, and well before the 15 s read
    assert.ok(elapsed >= 1000 && elapsed < 12_000, `closed after ${elapsed} ms`);
    client.socket.destroy();
  });

  test('the session deadline in the middle of DATA: 421, nothing stored', async () => {
    const to = `slowdata@${D}`;
    const { client } = await open(port);
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    client.write(`Subject: slow\r\n\r\n`);
    const trickle = setInterval(() => !client.closed && client.write('x'), 100);
    const r = await client.read(15_000);
    clearInterval(trickle);
    assert.equal(r.code, 421, r.text);
    client.socket.destroy();
    assert.equal((await listEmails(svc, to)).length, 0);
  });
});

describe('SMTP session deadline while the service decides', () => {
  test('a deadline that passes while a message is being stored: the 250 comes first, then 421', async () => {
    const inner = createSqliteStore(':memory:');
    const slow = new Proxy(inner, {
      get(target, prop, recv) {
        const v = Reflect.get(target, prop, recv);
        // slow on purpose: a store that takes 1.5 s to write is the scenario
        if (prop === 'addEmails') return async (...args: unknown[]) => (await new Promise((r) => setTimeout(r, 1500)), (v as (...a: unknown[]) => unknown).apply(target, args));
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const svc = await startService({}, { mounts: [], backends: { store: slow, bus: createMemoryBus(), limiter: createMemoryLimiter() } });
    const rx = createSmtpReceiver(svc.service.core, { sessionMs: 700 });
    const port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
    try {
      const { client } = await open(port);
      assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
      assert.equal((await client.cmd(`RCPT TO:<decide@${D}>`)).code, 250);
      const data = await client.data(toWire(message({ From: 'a@example.org', Subject: 'slow store' }, 'x')));
      assert.equal(data.code, 250, `the message's own reply is never replaced: ${data.text}`);
      const bye = await client.read(5000);
      assert.equal(bye.code, 421, bye.text);
      client.socket.destroy();
      assert.equal((await listEmails(svc, `decide@${D}`)).length, 1);
    } finally {
      await rx.close();
      await svc.stop();
    }
  });
});

describe('SMTP global connection cap', () => {
  test('connections over maxClients get 421', async () => {
    const svc = await startService({}, { mounts: [] });
    const rx = createSmtpReceiver(svc.service.core, { maxPerIp: 100, maxClients: 4 });
    const port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
    try {
      const held = await Promise.all([0, 1, 2, 3].map(() => SmtpClient.open(port)));
      for (const h of held) assert.equal(h.greeting.code, 220);
      const extra = await SmtpClient.open(port);
      assert.equal(extra.greeting.code, 421, extra.greeting.text);
      extra.client.socket.destroy();
      for (const h of held) await h.client.quit();
    } finally {
      await rx.close();
      await svc.stop();
    }
  });
});
