// SMTP behind a TCP load balancer (EPHEMAIL_SMTP_PROXY_PROTOCOL): a listed peer's connections start
// with a PROXY v1 or v2 header, and the client address it carries is the one the per-client caps
// and the logs use; a header from a peer outside the list, or a missing or broken header from a
// listed one, gets 421 and the connection closes; without the variable nothing changes. Real sockets
// over loopback: the "balancer" is 127.0.0.1, an outside peer connects from 127.0.0.2.
import assert from 'node:assert/strict';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { parseProxyHeader, PROXY_REFUSAL, startsWithProxySignature, V2_MAX, V2_SIGNATURE } from '../../src/smtp/proxy-protocol.ts';
import { createSmtpReceiver, type SmtpListener } from '../../src/smtp/server.ts';
import { captureLog, type CapturedLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, message, toWire, type Reply } from '../helpers/smtp.ts';
import { movableMidMinuteClock, until } from '../helpers/time.ts';

const D = 'ephemail.test';

// ---- headers as balancers write them (HAProxy's proxy-protocol.txt, section 2) ----

const v1 = (src: string, sport = 40001, dst = '192.0.2.25', dport = 25) => Buffer.from(`PROXY ${src.includes(':') ? 'TCP6' : 'TCP4'} ${src} ${dst} ${sport} ${dport}\r\n`, 'latin1');

function v2(opts: { src?: string; sport?: number; command?: 'PROXY' | 'LOCAL'; tlv?: Buffer } = {}): Buffer {
  const { src = '198.51.100.7', sport = 40002, command = 'PROXY', tlv = Buffer.alloc(0) } = opts;
  if (command === 'LOCAL') return Buffer.concat([V2_SIGNATURE, Buffer.from([0x20, 0x00, 0x00, 0x00])]);
  const six = src.includes(':');
  const addr = (ip: string) => (six ? ipv6Bytes(ip) : Buffer.from(ip.split('.').map(Number)));
  const dst = six ? '2001:db8::25' : '192.0.2.25';
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(sport, 0);
  ports.writeUInt16BE(25, 2);
  const body = Buffer.concat([addr(src), addr(dst), ports, tlv]);
  const head = Buffer.from([0x21, six ? 0x21 : 0x11, 0, 0]);
  head.writeUInt16BE(body.length, 2);
  return Buffer.concat([V2_SIGNATURE, head, body]);
}

function ipv6Bytes(ip: string): Buffer {
  const [h, t = ''] = ip.split('::');
  const hs = h ? h.split(':') : [];
  const ts = t ? t.split(':') : [];
  const groups = ip.includes('::') ? [...hs, ...Array(8 - hs.length - ts.length).fill('0'), ...ts] : hs;
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

describe('PROXY header parser', () => {
  test('v1 TCP4, TCP6 and UNKNOWN; the length excludes what follows', () => {
    const h = Buffer.concat([v1('203.0.113.9', 5555), Buffer.from('EHLO x\r\n')]);
    assert.deepEqual(parseProxyHeader(h), { state: 'done', version: 1, length: v1('203.0.113.9', 5555).length, source: { address: '203.0.113.9', port: 5555 } });
    const six = parseProxyHeader(v1('2001:DB8::7', 1, '2001:db8::1'));
    assert.equal(six.state === 'done' && six.source?.address, '2001:db8::7');
    assert.deepEqual(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n')), { state: 'done', version: 1, length: 15, source: null });
  });

  test('v2 TCP over IPv4 and IPv6 (with TLVs), and LOCAL', () => {
    const tlv = Buffer.from([0x05, 0x00, 0x03, 0x61, 0x62, 0x63]); // PP2_TYPE_UNIQUE_ID "abc"
    const four = v2({ src: '198.51.100.7', sport: 40002, tlv });
    assert.deepEqual(parseProxyHeader(Buffer.concat([four, Buffer.from('rest')])), { state: 'done', version: 2, length: four.length, source: { address: '198.51.100.7', port: 40002 } });
    const six = parseProxyHeader(v2({ src: '2001:db8:1:2::9', sport: 7 }));
    assert.deepEqual(six.state === 'done' && six.source, { address: '2001:db8:1:2::9', port: 7 });
    assert.deepEqual(parseProxyHeader(v2({ command: 'LOCAL' })), { state: 'done', version: 2, length: 16, source: null });
  });

  test('an IPv4-mapped IPv6 source (v2 and v1 TCP6) is the IPv4 client address (issue 35, finding 7)', () => {
    // ::ffff:198.51.100.9 written in hex groups; before, it came out as "::ffff:c633:6409" (not what SPF or the caps take)
    const mapped = parseProxyHeader(v2({ src: '::ffff:c633:6409', sport: 4242 }));
    assert.deepEqual(mapped.state === 'done' && mapped.source, { address: '198.51.100.9', port: 4242 });
    const dotted = parseProxyHeader(Buffer.from('PROXY TCP6 ::ffff:198.51.100.9 2001:db8::25 4243 25\r\n', 'latin1'));
    assert.deepEqual(dotted.state === 'done' && dotted.source, { address: '198.51.100.9', port: 4243 });
    // an address that only looks alike stays IPv6
    const compat = parseProxyHeader(v2({ src: '::c633:6409' }));
    assert.equal(compat.state === 'done' && compat.source?.address, '::c633:6409');
  });

  test('a header cut anywhere asks for more bytes, and reads the same once whole', () => {
    for (const h of [v1('203.0.113.9'), v2(), v2({ src: '2001:db8::1' })]) {
      const whole = parseProxyHeader(h);
      assert.equal(whole.state, 'done');
      for (let i = 1; i < h.length; i++) assert.deepEqual(parseProxyHeader(h.subarray(0, i)), { state: 'more' }, `cut at ${i}`);
    }
  });

  test('malformed headers are invalid, with a reason', () => {
    const bad: [string, Buffer][] = [
      ['not a header', Buffer.from('EHLO client.example\r\n')],
      ['lowercase', Buffer.from('proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n')],
      ['bare LF', Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n')],
      ['family mismatch', Buffer.from('PROXY TCP4 2001:db8::1 5.6.7.8 1 2\r\n')],
      ['bad address', Buffer.from('PROXY TCP4 999.1.1.1 5.6.7.8 1 2\r\n')],
      ['host name', Buffer.from('PROXY TCP4 evil.example 5.6.7.8 1 2\r\n')],
      ['port out of range', Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 65536 25\r\n')],
      ['double space', Buffer.from('PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n')],
      ['unknown protocol', Buffer.from('PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n')],
      ['over 107 bytes', Buffer.from(`PROXY TCP4 1.2.3.4 5.6.7.8 1 2${' '.repeat(120)}`)],
      ['v2 version 1', Buffer.concat([V2_SIGNATURE, Buffer.from([0x11, 0x11, 0, 12]), Buffer.alloc(12)])],
      ['v2 unknown command', Buffer.concat([V2_SIGNATURE, Buffer.from([0x22, 0x11, 0, 12]), Buffer.alloc(12)])],
      ['v2 length short of its addresses', Buffer.concat([V2_SIGNATURE, Buffer.from([0x21, 0x11, 0, 4]), Buffer.alloc(4)])],
      ['v2 UDP', Buffer.concat([V2_SIGNATURE, Buffer.from([0x21, 0x12, 0, 12]), Buffer.alloc(12)])],
      ['v2 too long', Buffer.concat([V2_SIGNATURE, Buffer.from([0x21, 0x11, 0xff, 0xff])])],
    ];
    for (const [what, buf] of bad) {
      const r = parseProxyHeader(buf);
      assert.equal(r.state, 'invalid', what);
      assert.ok(r.state === 'invalid' && r.reason.length > 0);
    }
    assert.ok(V2_MAX < 0xffff + 16);
  });

  test('the signature check wants a whole signature', () => {
    assert.equal(startsWithProxySignature(v1('1.2.3.4')), true);
    assert.equal(startsWithProxySignature(v2()), true);
    assert.equal(startsWithProxySignature(Buffer.from('PROX')), false);
    assert.equal(startsWithProxySignature(Buffer.from('\r\n')), false);
    assert.equal(startsWithProxySignature(Buffer.from('EHLO x\r\n')), false);
  });
});

/** A connection to the receiver from `localAddress` (127.0.0.1 is the listed balancer). */
function rawConnect(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: '127.0.0.1', localAddress });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** Everything the server writes until it closes the connection. */
function readToClose(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => (out += d));
    s.on('error', () => undefined);
    s.on('close', () => resolve(out));
  });
}

/** An SMTP session through the "balancer": the header first, then the dialogue. */
async function through(port: number, header: Buffer | null, localAddress = '127.0.0.1'): Promise<{ client: SmtpClient; greeting: Reply }> {
  const socket = await rawConnect(port, localAddress);
  if (header) socket.write(header);
  return SmtpClient.attach(socket);
}

async function deliver(client: SmtpClient, to: string, subject: string): Promise<Reply> {
  assert.equal((await client.cmd('EHLO sender.example')).code, 250);
  assert.equal((await client.cmd('MAIL FROM:<a@sender.example>')).code, 250);
  assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
  return client.data(toWire(message({ From: 'a@sender.example', Subject: subject }, 'x')));
}

describe('SMTP behind a PROXY protocol balancer', () => {
  let svc: TestService;
  let captured: CapturedLog;
  let rx: SmtpListener;
  let port: number;
  before(async () => {
    captured = captureLog();
    svc = await startService({ EPHEMAIL_SMTP_PROXY_PROTOCOL: '127.0.0.1/32,192.0.2.0/24', EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '3' }, { mounts: [], log: captured.log, clock: movableMidMinuteClock() });
    // the same service's receiver with small caps and a short header wait
    rx = createSmtpReceiver(svc.service.core, { maxPerIp: 2, proxyHeaderMs: 400 });
    port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
  });
  after(async () => {
    await rx.close();
    await svc.stop();
  });

  for (const [version, header] of [
    ['v1', v1('203.0.113.10')],
    ['v2', v2({ src: '203.0.113.20' })],
    ['v2 over IPv6', v2({ src: '2001:db8:5::20' })],
  ] as const) {
    test(`${version}: the carried client address is in the logs of the delivery`, async () => {
      const client = header.length > 60 ? '2001:db8:5::20' : header[0] === 0x50 ? '203.0.113.10' : '203.0.113.20';
      const { client: c, greeting } = await through(svc.smtpPort, header);
      assert.equal(greeting.code, 220, greeting.text);
      const to = `proxied-${version.replace(/\W/g, '')}@${D}`;
      const r = await deliver(c, to, `through the balancer (${version})`);
      assert.equal(r.code, 250, r.text);
      await c.quit();
      const received = captured.find('mail received').filter((l) => l.client === client);
      assert.equal(received.length, 1, JSON.stringify(captured.find('mail received')));
      assert.ok(captured.find('through a PROXY protocol balancer').some((l) => l.client === client && l.peer === '127.0.0.1'));
    });
  }

  for (const [version, header] of [['v1', (ip: string) => v1(ip)], ['v2', (ip: string) => v2({ src: ip })]] as const) {
    test(`${version}: the per-client connection cap counts the carried address, not the balancer`, async () => {
      const a = version === 'v1' ? '203.0.113.31' : '203.0.113.41';
      const b = version === 'v1' ? '203.0.113.32' : '203.0.113.42';
      const held = [await through(port, header(a)), await through(port, header(a))];
      for (const h of held) assert.equal(h.greeting.code, 220, h.greeting.text);
      const third = await through(port, header(a));
      assert.equal(third.greeting.code, 421, `a third connection from ${a}: ${third.greeting.text}`);
      assert.match(third.greeting.text, /4\.7\.0 Too many connections from your address/);
      third.client.socket.destroy();
      const other = await through(port, header(b));
      assert.equal(other.greeting.code, 220, 'another client through the same balancer is not held back');
      assert.ok(captured.find('too many open from this client').some((l) => l.client === a));
      for (const h of [...held, other]) await h.client.quit();
    });
  }

  test('the per-IP rate cap counts the carried address', async () => {
    const capped = '203.0.113.50';
    for (let i = 0; i < 3; i++) {
      const { client } = await through(svc.smtpPort, v2({ src: capped }));
      assert.equal((await deliver(client, `rate@${D}`, `rate ${i}`)).code, 250);
      await client.quit();
    }
    const { client } = await through(svc.smtpPort, v1(capped));
    await client.cmd('EHLO sender.example');
    const over = await client.cmd('MAIL FROM:<a@sender.example>');
    assert.equal(over.code, 451, over.text);
    await client.quit();
    const fresh = await through(svc.smtpPort, v1('203.0.113.51'));
    assert.equal((await deliver(fresh.client, `rate@${D}`, 'another client')).code, 250);
    await fresh.client.quit();
    assert.ok(captured.find('inbound cap reached').some((l) => l.client === capped));
  });

  test('v2 with an IPv4-mapped IPv6 client: the delivery is logged and checked under the IPv4 address', async () => {
    const { client, greeting } = await through(svc.smtpPort, v2({ src: '::ffff:c633:640a' }));
    assert.equal(greeting.code, 220, greeting.text);
    assert.equal((await deliver(client, `mapped@${D}`, 'mapped client')).code, 250);
    await client.quit();
    assert.ok(captured.find('through a PROXY protocol balancer').some((l) => l.client === '198.51.100.10'), JSON.stringify(captured.find('through a PROXY protocol balancer').slice(-1)));
    assert.ok(captured.find('mail received').some((l) => l.client === '198.51.100.10'));
  });

  test('v2 LOCAL (the balancer\'s own health check) is served as the balancer itself', async () => {
    const { client, greeting } = await through(svc.smtpPort, v2({ command: 'LOCAL' }));
    assert.equal(greeting.code, 220);
    assert.equal((await client.cmd('NOOP')).code, 250);
    await client.quit();
    assert.ok(captured.find('through a PROXY protocol balancer').some((l) => l.client === null && l.peer === '127.0.0.1'));
  });

  test('a listed peer without a valid header gets 421 and is closed: garbage, a plain SMTP client, silence', async () => {
    for (const bytes of [Buffer.from('PROXY TCP4 999.0.0.1 192.0.2.25 1 25\r\n'), Buffer.from('EHLO no-header.example\r\n'), Buffer.concat([V2_SIGNATURE, Buffer.from([0x21, 0x12, 0, 12]), Buffer.alloc(12)])]) {
      const s = await rawConnect(port);
      const out = readToClose(s);
      s.write(bytes);
      assert.equal(await out, PROXY_REFUSAL, bytes.toString('latin1'));
    }
    const silent = await rawConnect(port);
    const t0 = performance.now();
    assert.equal(await readToClose(silent), PROXY_REFUSAL);
    // bound: the header wait is observed (a lower bound: a loaded machine only makes it longer)
    assert.ok(performance.now() - t0 >= 350, 'refused once the header wait (400 ms here) is over');
    await until(() => captured.find('PROXY protocol header').some((l) => String(l.reason).startsWith('no PROXY protocol header within')), 'the silent balancer is logged');
  });

  test('a peer outside the list that sends a PROXY header (v1 or v2, before or after the greeting) gets 421 and is closed', async () => {
    for (const header of [v1('203.0.113.66'), v2({ src: '203.0.113.66' })]) {
      const s = await rawConnect(svc.smtpPort, '127.0.0.2');
      const out = readToClose(s);
      s.write(header);
      assert.equal(await out, PROXY_REFUSAL);
    }
    const { client, greeting } = await SmtpClient.open(svc.smtpPort, '127.0.0.1', '127.0.0.2');
    assert.equal(greeting.code, 220, 'an outside peer is greeted like any client');
    client.write(v1('203.0.113.66'));
    const r = await client.read();
    assert.equal(r.code, 421, r.text);
    assert.match(r.text, /PROXY protocol header refused/);
    await until(() => client.closed, 'the connection is closed');
    const refused = captured.find('SMTP connection refused: PROXY protocol header').filter((l) => l.peer === '127.0.0.2');
    assert.equal(refused.length, 3);
    assert.match(String(refused[0].reason), /outside EPHEMAIL_SMTP_PROXY_PROTOCOL/);
    assert.equal(captured.find('mail received').filter((l) => l.client === '203.0.113.66').length, 0);
  });

  test('a peer outside the list that speaks plain SMTP delivers as before, under its own address', async () => {
    const { client, greeting } = await SmtpClient.open(svc.smtpPort, '127.0.0.1', '127.0.0.2');
    assert.equal(greeting.code, 220);
    assert.equal((await deliver(client, `direct@${D}`, 'direct')).code, 250);
    await client.quit();
    assert.ok(captured.find('mail received').some((l) => l.client === '127.0.0.2'));
  });
});

describe('without EPHEMAIL_SMTP_PROXY_PROTOCOL', () => {
  test('a PROXY header names nobody: the connection is an early talker (421), and plain clients deliver under their own address', async () => {
    const captured = captureLog();
    const svc = await startService({}, { mounts: [], log: captured.log });
    try {
      const s = await rawConnect(svc.smtpPort);
      const out = readToClose(s);
      s.write(v1('203.0.113.77'));
      assert.match(await out, /^421 /);
      const { client, greeting } = await SmtpClient.open(svc.smtpPort);
      assert.equal(greeting.code, 220);
      assert.equal((await deliver(client, `plain@${D}`, 'plain')).code, 250);
      await client.quit();
      assert.deepEqual(captured.find('mail received').map((l) => l.client), ['127.0.0.1']);
      assert.equal(captured.find('PROXY').length, 0);
    } finally {
      await svc.stop();
    }
  });
});
