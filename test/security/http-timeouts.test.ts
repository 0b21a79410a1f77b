// Sockets that hold the HTTP server without finishing a request (socket timeouts). Over real sockets, with the timeouts shortened for the test: a
// client that trickles its headers is answered 400 and closed once the header time is up, and so is a
// client that connects and says nothing; a request whose body never
// completes is cut at the request time. Health answers throughout.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { HTTP_TIMEOUTS } from '../../src/http/app.ts';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let port: number;
const timeouts = { headersMs: 800, requestMs: 1500, idleMs: 1200, checkEveryMs: 100 };

before(async () => {
  svc = await startService({}, { httpTimeouts: timeouts });
  port = Number(new URL(svc.http).port);
});
after(() => svc.stop());

/** Opens a raw socket; resolves with what the server sent and when it closed (ms after open). */
function rawClient(): { socket: Socket; closed: Promise<{ ms: number; received: string }> } {
  const socket = connect({ host: '127.0.0.1', port });
  const t0 = performance.now();
  let received = '';
  socket.on('data', (d) => (received += d.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<{ ms: number; received: string }>((r) => socket.on('close', () => r({ ms: performance.now() - t0, received })));
  return { socket, closed };
}

test('the defaults: headers 30 s, a request 120 s, an idle socket 130 s', () => {
  assert.deepEqual({ ...HTTP_TIMEOUTS }, { headersMs: 30_000, requestMs: 120_000, idleMs: 130_000, checkEveryMs: 5_000 });
  assert.ok(HTTP_TIMEOUTS.requestMs > 30_000 + 15_000, 'a 30 s wait fits inside a request');
  assert.ok(HTTP_TIMEOUTS.idleMs > HTTP_TIMEOUTS.requestMs);
});

test('a client trickling its headers one byte at a time gets 400 and is closed when the header time is up', async () => {
  const { socket, closed } = rawClient();
  socket.write('GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n');
  const trickle = setInterval(() => { if (!socket.destroyed) socket.write('X'); }, 50); // never idle, never done
  const health = await fetch(`${svc.http}/api/v1/health`);
  assert.equal(health.status, 200, 'others are served meanwhile');
  const { ms, received } = await closed;
  clearInterval(trickle);
  // bound: closed at the timeout (lower bound), not much later; the upper one generous for a loaded machine
  assert.ok(ms >= timeouts.headersMs - 50 && ms < timeouts.headersMs + 5000, `closed after ${Math.round(ms)} ms`);
  assert.match(received, /^HTTP\/1\.1 400 /);
  assert.match(received, /"type":"invalid_request"/);
  assert.match(received, /not received in time/);
});

test('a socket that connects and sends nothing is closed when the header time is up (the clock starts at connect)', async () => {
  const { closed } = rawClient();
  const { ms, received } = await closed;
  // bound: closed at the timeout (lower bound), not much later; the upper one generous for a loaded machine
  assert.ok(ms >= timeouts.headersMs - 50 && ms < timeouts.headersMs + 5000, `closed after ${Math.round(ms)} ms`);
  assert.ok(received === '' || /^HTTP\/1\.1 400 /.test(received), received);
});

test('a request whose body never completes is cut at the request time', async () => {
  const { socket, closed } = rawClient();
  socket.write('POST /api/v1/keys HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
  const trickle = setInterval(() => { if (!socket.destroyed) socket.write(' '); }, 50);
  const { ms, received } = await closed;
  clearInterval(trickle);
  // bound: closed at the timeout (lower bound), not much later; the upper one generous for a loaded machine
  assert.ok(ms >= timeouts.requestMs - 50 && ms < timeouts.requestMs + 5000, `closed after ${Math.round(ms)} ms`);
  assert.doesNotMatch(received, /HTTP\/1\.1 201/, 'no key was minted from a cut body');
  const health = await fetch(`${svc.http}/api/v1/health`);
  assert.equal(health.status, 200);
});

test('a socket on which nothing moves is closed at the idle time (here a held wait, with the idle time set below it)', async () => {
  const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
  const { socket, closed } = rawClient();
  socket.write(`GET /api/v1/inboxes/idle%40ephemail.test/emails?wait=30 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  const { ms, received } = await closed;
  // bound: closed once idle (lower bound), well before the 30 s wait would end; the upper one generous for a loaded machine
  assert.ok(ms >= timeouts.idleMs - 50 && ms < timeouts.idleMs + 5000, `closed after ${Math.round(ms)} ms`);
  assert.equal(received, '', 'no answer: the wait was still held');
  assert.equal((await fetch(`${svc.http}/api/v1/health`)).status, 200);
});
