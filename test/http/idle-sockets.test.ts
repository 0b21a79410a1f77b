// The idle-socket sweep (src/http/idle-sockets.ts), over real sockets on a real HTTP server, with the
// sweep's clock moved by the test: a socket on which nothing moves for the idle time is closed, one
// whose bytes moved since the last look is kept, and a client that stops reading a download is cut.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { closeIdleSockets } from '../../src/http/idle-sockets.ts';
import { until } from '../helpers/time.ts';

const IDLE_MS = 60_000;
let clock = 0;
/** How many times the sweep (or a new connection) has read the clock. */
let reads = 0;
let server: Server;
let port: number;
let stop: () => void;
/** The server's side of each connection, in order. */
const accepted: Socket[] = [];
const big = Buffer.alloc(64 * 1024 * 1024, 'x'); // larger than loopback's socket buffers: a client that stops reading stalls it

before(async () => {
  server = createServer((req, res) => {
    if (req.url === '/big') return void res.end(big);
    if (req.url === '/held') return; // answered never: the client waits
    res.end('ok');
  });
  // no Node timeouts: only the sweep closes sockets here
  server.keepAliveTimeout = 0;
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  server.on('connection', (s: Socket) => accepted.push(s));
  stop = closeIdleSockets(server, IDLE_MS, 10, () => {
    reads++;
    return clock;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  stop();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function open(): Promise<{ socket: Socket; closed: () => boolean; received: () => number }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let closed = false;
    let received = 0;
    socket.on('close', () => (closed = true));
    socket.on('data', (d) => (received += d.length));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, closed: () => closed, received: () => received }));
    socket.once('error', reject);
  });
}

/** Resolves once a sweep has looked at every socket after this call (a sweep reads the clock, then looks). */
async function swept(): Promise<void> {
  const from = reads;
  await until(() => reads >= from + 2, 'a sweep looked');
}

/** The server's side of the newest connection, once it has read `bytes` bytes. */
async function serverSide(bytes: number): Promise<Socket> {
  await until(() => (accepted.at(-1)?.bytesRead ?? 0) >= bytes, 'the server read the request');
  return accepted.at(-1)!;
}

/**
 * Once a sweep has seen the socket's latest bytes: still open 1 ms short of the idle time (`kept`
 * says why), closed once it is up.
 */
async function closesAtIdleTime(c: { closed: () => boolean }, kept: string): Promise<void> {
  await swept();
  clock += IDLE_MS - 1;
  await swept();
  assert.equal(c.closed(), false, kept);
  clock += 2;
  await until(c.closed, 'the socket was closed once idle for the whole time');
}

test('a socket with a held request and no bytes moving is closed once the idle time has passed, not before', async () => {
  const c = await open();
  const request = 'GET /held HTTP/1.1\r\nHost: x\r\n\r\n';
  c.socket.write(request);
  await serverSide(request.length);
  await closesAtIdleTime(c, 'kept while under the idle time');
});

test('a socket whose bytes moved since the last look is kept, whatever the clock says', async () => {
  const c = await open();
  c.socket.write('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
  await until(() => c.received() > 0, 'the answer arrived');
  await swept();
  clock += IDLE_MS - 1;
  c.socket.write('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n'); // activity just before the idle time is up
  const before = c.received();
  await until(() => c.received() > before, 'the second answer arrived');
  // the sweep sees the movement and restarts the socket's idle time
  await closesAtIdleTime(c, 'kept: its idle time restarted when its bytes moved');
});

test('a client that stops reading a download is cut once nothing has moved for the idle time', async () => {
  const c = await open();
  c.socket.pause(); // reads nothing: the server's writes stall once the socket buffers are full
  const request = 'GET /big HTTP/1.1\r\nHost: x\r\n\r\n';
  c.socket.write(request);
  const side = await serverSide(request.length);
  // the whole answer is queued at once (a socket's bytesWritten counts what is queued): from the
  // sweep's side nothing moves after that
  await until(() => side.bytesWritten >= big.length, 'the answer was queued');
  await swept();
  assert.equal(side.destroyed, false);
  clock += IDLE_MS;
  // (seen on the server's side: a paused client does not read, so it notices nothing yet)
  await until(() => side.destroyed, 'the stalled download was cut');
  c.socket.resume();
  await until(c.closed, 'the client saw its socket close');
  assert.ok(c.received() < big.length, 'the download did not complete');
});
