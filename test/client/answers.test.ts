// @ephemail/client and its shell command against a service that answers badly, over real sockets:
// a redirect to another origin (another 127.0.0.x port, where a second server records whatever
// reaches it: the API key must not), bodies larger than the cap (streamed, or declared), bodies that
// are not JSON or lack what the client reads, an answer cut off. Each is an EphemailError (the command:
// exit 1 with one line), and the client stops reading a body at its cap.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createEphemail, DEFAULT_MAX_BODY_BYTES, EphemailError } from '@ephemail/client';
import { ROOT } from '../helpers/serve.ts';

const BIN = join(ROOT, 'packages/client/bin/ephemail-client.js');
const KEY = `eph_${'k'.repeat(40)}`;
const MiB = 1024 * 1024;
const ID = '01a20000-0000-7000-8000-000000000000';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A server on `host`, answering with `handler()` (changed by each test). */
async function listen(host: string, handler: () => Handler): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => handler()(req, res));
  await new Promise<void>((ok) => server.listen(0, host, ok));
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}` };
}

/** What reached the other origin: method, path and authorization of each request. */
const elsewhere: { method?: string; url?: string; authorization?: string }[] = [];
let other: { server: Server; url: string };
let service: { server: Server; url: string };
let answer: Handler = (_req, res) => res.end();
/** Bytes of body the service's last streamed answer wrote before the client went away (or it ended). */
let written = 0;

before(async () => {
  // another origin: another loopback address and port (IP literals only)
  other = await listen('127.0.0.2', () => (req, res) => {
    elsewhere.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    res.setHeader('content-type', 'application/json');
    res.statusCode = req.method === 'POST' ? 201 : 200;
    res.end(JSON.stringify({ data: { id: ID, address: 'stolen@ephemail.test', api_key: KEY, subject: 's', codes: [], links: [] } }));
  });
  service = await listen('127.0.0.1', () => answer);
});
after(() => {
  other.server.close();
  service.server.close();
});

/** Answers `status` with a JSON body of about `bytes` (valid JSON: `{"data": {..., "pad": "aaa…"}}`), streamed; counts what was written. */
function streamJson(bytes: number, { status = 200, declare = false } = {}): Handler {
  return (req, res) => {
    const head = Buffer.from(`{"data":{"id":"${ID}","address":"big@ephemail.test","api_key":"${KEY}","subject":"s","codes":[],"links":[],"pad":"`);
    const tail = Buffer.from('"}}');
    const chunk = Buffer.alloc(MiB, 97);
    const chunks = Math.ceil(bytes / MiB);
    written = 0;
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    if (declare) res.setHeader('content-length', head.length + chunks * MiB + tail.length);
    res.write(head);
    let n = 0;
    const more = () => {
      while (n < chunks && !res.destroyed) {
        n++;
        written += MiB;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      if (!res.destroyed) res.end(tail);
    };
    more();
  };
}

/** Answers `status` with `body` as is. */
const plain = (status: number, body: string, type = 'application/json'): Handler => (_req, res) => {
  res.writeHead(status, { 'content-type': type });
  res.end(body);
};

function redirect(status: number, to: () => string): Handler {
  return (req, res) => {
    req.resume();
    res.writeHead(status, { location: to() + (req.url ?? '/') });
    res.end();
  };
}

const isError = (type: string, status?: number) => (e: unknown) => {
  assert.ok(e instanceof EphemailError, `an EphemailError, got ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  assert.equal(e.type, type, e.message);
  if (status !== undefined) assert.equal(e.status, status);
  return true;
};

test('a redirect to another origin is refused before anything reaches it (GET and POST, 301/302/303/307/308); the key stays', async () => {
  const mail = createEphemail({ baseUrl: service.url, apiKey: KEY });
  for (const status of [301, 302, 303, 307, 308]) {
    elsewhere.length = 0;
    answer = redirect(status, () => other.url);
    await assert.rejects(mail.getEmail(ID), isError('redirect_refused', status));
    await assert.rejects(mail.createInbox(), isError('redirect_refused', status));
    await assert.rejects(mail.inbox('a@ephemail.test').emails(), (e: unknown) => isError('redirect_refused')(e) && /another origin \(http:\/\/127\.0\.0\.2:\d+\)/.test((e as Error).message));
    assert.deepEqual(elsewhere, [], `HTTP ${status}: nothing reaches the other origin`);
  }
  // the same host on another port is another origin too
  answer = redirect(302, () => other.url.replace('127.0.0.2', '127.0.0.1'));
  await assert.rejects(mail.getEmail(ID), isError('redirect_refused', 302));
  // a key minted through a redirect is refused the same way (no key given yet)
  answer = redirect(307, () => other.url);
  await assert.rejects(createEphemail({ baseUrl: service.url }).ensureKey(), isError('redirect_refused', 307));
  assert.deepEqual(elsewhere, []);
});

test('a redirect within the service origin is followed, with the key; a loop of them ends in an error', async () => {
  const seen: (string | undefined)[] = [];
  const mail = createEphemail({ baseUrl: `${service.url}/old`, apiKey: KEY });
  // /old/api/v1/emails/{id} → 308 to /api/v1/emails/{id} (no /old: the handler's Location is the bare path)
  answer = (req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    if (req.url?.startsWith('/old/')) {
      res.writeHead(308, { location: req.url.slice(4) });
      return res.end();
    }
    if (req.url === '/api/v1/emails/loop') {
      res.writeHead(302, { location: '/api/v1/emails/loop' });
      return res.end();
    }
    return plain(200, JSON.stringify({ data: { id: ID, subject: 'moved', codes: [], links: [] } }))(req, res);
  };
  const email = await mail.getEmail(ID);
  assert.equal(email.subject, 'moved');
  assert.deepEqual(seen, [`GET /old/api/v1/emails/${ID} Bearer ${KEY}`, `GET /api/v1/emails/${ID} Bearer ${KEY}`]);
  await assert.rejects(createEphemail({ baseUrl: service.url, apiKey: KEY }).getEmail('loop'), isError('redirect_refused', 302));
});

test(`a body larger than the cap (default ${DEFAULT_MAX_BODY_BYTES / MiB} MiB) is refused, and the client stops reading it`, async () => {
  assert.equal(DEFAULT_MAX_BODY_BYTES, 64 * MiB);
  const mail = createEphemail({ baseUrl: service.url, apiKey: KEY });
  // a 200 MiB answer, streamed (chunked: no length said in advance)
  answer = streamJson(200 * MiB);
  await assert.rejects(mail.getEmail(ID), (e: unknown) => isError('response_too_large', 200)(e) && /larger than 64 MiB/.test((e as Error).message));
  assert.ok(written < 64 * MiB + 48 * MiB, `the client stopped reading near its cap: the service wrote ${written / MiB} MiB of 200`);
  // the same as an error answer, and as the raw message
  answer = streamJson(200 * MiB, { status: 500 });
  await assert.rejects(mail.inbox('a@ephemail.test').clear(), isError('response_too_large', 500));
  assert.ok(written < 112 * MiB, `error answer: the service wrote ${written / MiB} MiB of 200`);
  // a declared length above the cap is refused before the body is read
  answer = streamJson(200 * MiB, { declare: true });
  await assert.rejects(mail.createInbox(), isError('response_too_large', 200));
  assert.ok(written < 112 * MiB, `declared: the service wrote ${written / MiB} MiB of 200`);
});

test('maxBodyBytes sets the cap: an answer up to it is read, one byte more is refused (also raw())', async () => {
  const small = createEphemail({ baseUrl: service.url, apiKey: KEY, maxBodyBytes: 4096 });
  const body = (pad: number) => JSON.stringify({ data: { id: ID, subject: 'cap', codes: [], links: [], pad: 'a'.repeat(pad) } });
  const fits = body(0).length;
  answer = plain(200, body(4096 - fits));
  assert.equal((await small.getEmail(ID)).subject, 'cap');
  answer = plain(200, body(4097 - fits));
  await assert.rejects(small.getEmail(ID), (e: unknown) => isError('response_too_large', 200)(e) && /larger than 4 KiB \(maxBodyBytes\)/.test((e as Error).message));
  // raw(): the message bytes, under the same cap
  answer = (req, res) => (req.url?.endsWith('/raw') ? plain(200, 'x'.repeat(5000), 'message/rfc822')(req, res) : plain(200, body(0))(req, res));
  const email = await small.getEmail(ID);
  await assert.rejects(email.raw(), isError('response_too_large', 200));
  answer = (req, res) => (req.url?.endsWith('/raw') ? plain(200, 'x'.repeat(4096), 'message/rfc822')(req, res) : plain(200, body(0))(req, res));
  assert.equal((await email.raw()).length, 4096);
  assert.throws(() => createEphemail({ maxBodyBytes: 0 }), TypeError);
});

test('an answer that is not JSON, not the envelope, or without the field read is an EphemailError; so is one cut off', async () => {
  const mail = createEphemail({ baseUrl: service.url, apiKey: KEY });
  answer = plain(200, '<html>proxy login</html>', 'text/html');
  await assert.rejects(mail.getEmail(ID), (e: unknown) => isError('invalid_response', 200)(e) && /^GET \/api\/v1\/emails\/\{id\}: the service's answer \(HTTP 200\) is not JSON$/.test((e as Error).message));
  answer = plain(201, '{"data": {"addr');
  await assert.rejects(mail.createInbox(), isError('invalid_response', 201));
  answer = plain(200, '[1, 2]');
  await assert.rejects(mail.inbox('a@ephemail.test').emails(), isError('invalid_response', 200));
  answer = plain(201, JSON.stringify({ data: { addr: 'x' } }));
  await assert.rejects(mail.createInbox(), (e: unknown) => isError('invalid_response')(e) && /has no "data\.address"/.test((e as Error).message));
  answer = plain(200, JSON.stringify({ data: 'nope' }));
  await assert.rejects(mail.inbox('a@ephemail.test').waitForEmail({ timeoutMs: 1000 }), isError('invalid_response'));
  // an error answer without the error envelope: the status says what it was
  answer = plain(502, '<html>bad gateway</html>', 'text/html');
  await assert.rejects(mail.getEmail(ID), (e: unknown) => isError('internal_error', 502)(e) && /^HTTP 502/.test((e as Error).message));
  answer = plain(403, 'forbidden', 'text/plain');
  await assert.rejects(mail.getEmail(ID), isError('http_error', 403));
  // a body cut off before its declared length
  answer = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    res.write('{"data":{"id":"');
    setTimeout(() => res.socket?.destroy(), 50);
  };
  await assert.rejects(mail.getEmail(ID), isError('connection_error', 200));
});

// -- the shell command ---------------------------------------------------------------------------

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const env: NodeJS.ProcessEnv = { ...process.env, EPHEMAIL_URL: service.url, EPHEMAIL_API_KEY: KEY };
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

test('ephemail-client: a redirect elsewhere, a body over 64 MiB, an answer not JSON: exit 1, one line saying which', async () => {
  elsewhere.length = 0;
  answer = redirect(307, () => other.url);
  let r = await cli(['inbox']);
  assert.deepEqual([r.code, r.stdout], [1, '']);
  assert.match(r.stderr, /^ephemail-client: POST \/api\/v1\/inboxes: the service redirected to another origin \(http:\/\/127\.0\.0\.2:\d+\); refused, so the API key is not sent there \(point baseUrl at the address the service answers on\)\n$/);
  r = await cli(['wait', 'a@ephemail.test', '--timeout', '5']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^ephemail-client: GET \/api\/v1\/inboxes\/a%40ephemail\.test\/latest: the service redirected to another origin/);
  assert.deepEqual(elsewhere, [], 'nothing reached the other origin');

  answer = streamJson(200 * MiB, { status: 201 });
  r = await cli(['inbox']);
  assert.deepEqual([r.code, r.stdout], [1, '']);
  assert.equal(r.stderr, "ephemail-client: POST /api/v1/inboxes: the service's answer is larger than 64 MiB (maxBodyBytes); not read\n");
  assert.ok(written < 112 * MiB, `the command stopped reading: the service wrote ${written / MiB} MiB of 200`);

  answer = plain(200, '<html>sign in to the proxy</html>', 'text/html');
  r = await cli(['wait', 'a@ephemail.test', '--timeout', '5']);
  assert.deepEqual([r.code, r.stdout], [1, '']);
  assert.equal(r.stderr, "ephemail-client: GET /api/v1/inboxes/{address}/latest: the service's answer (HTTP 200) is not JSON\n");
});
