// One IPv6 site must not take every live-stream slot, over real HTTP: the inbox page's event streams are capped per /64, per /56 and per /48 at
// once. The clients' addresses come from X-Forwarded-For through a trusted proxy on loopback, as
// behind a load balancer (the only way to have many IPv6 clients on one machine's loopback).
import assert from 'node:assert/strict';
import { request, type ClientRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { STREAM_CAPS } from '../../src/web/security.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
const open: ClientRequest[] = [];

before(async () => {
  svc = await startService({ EPHEMAIL_TRUST_PROXY: 'true' });
});
after(async () => {
  for (const r of open) r.destroy();
  await svc.stop();
});

/** Opens the page's event stream as client `ip`; resolves with its status (a 200 stays open). */
function stream(ip: string, n: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${svc.http}/api/v1/inboxes/v6-${n}@ephemail.test/events`, { headers: { 'x-forwarded-for': ip, accept: 'text/event-stream', 'sec-fetch-site': 'same-origin' }, agent: false });
    req.on('response', (res) => {
      resolve(res.statusCode ?? 0);
      if (res.statusCode === 200) {
        open.push(req);
        res.resume();
      } else res.resume();
    });
    req.on('error', reject);
    req.end();
  });
}

test('caps per /64, /56 and /48 hold together; a neighbour outside the block still gets a stream', async () => {
  assert.deepEqual({ ...STREAM_CAPS }, { perAddress: 10, per56: 20, per48: 40 });
  // the client ports whose connections the server has seen closed (a stream's slot frees then)
  const closedPorts = new Set<number>();
  svc.service.app.server.on('connection', (socket) => {
    const port = socket.remotePort;
    socket.once('close', () => port && closedPorts.add(port));
  });
  let n = 0;
  // one /64: 10, then refused; the next /64 of the same /56 still gets one
  for (let i = 1; i <= 10; i++) assert.equal(await stream(`2001:db8:0:100::${i.toString(16)}`, n++), 200, `stream ${i} of the /64`);
  assert.equal(await stream('2001:db8:0:100::ff', n++), 429, 'the 11th from one /64');
  assert.equal(await stream('2001:db8:0:101::1', n++), 200, 'another /64 of the /56');
  // the /56 (2001:db8:0:100::/56): 20 across its /64s, then refused even from a fresh /64
  for (let i = 2; i <= 10; i++) assert.equal(await stream(`2001:db8:0:1${i.toString(16).padStart(2, '0')}::1`, n++), 200, `/64 number ${i} of the /56`);
  assert.equal(await stream('2001:db8:0:1ff::1', n++), 429, 'the 21st from one /56, from a /64 that holds none');
  assert.equal(await stream('2001:db8:0:200::1', n++), 200, 'another /56 of the /48');
  // the /48 (2001:db8::/48): 40 across its /56s, then refused even from a fresh /56
  for (let i = 0; i < 10; i++) assert.equal(await stream(`2001:db8:0:300::${(i + 1).toString(16)}`, n++), 200);
  for (let i = 0; i < 9; i++) assert.equal(await stream(`2001:db8:0:4${i.toString(16).padStart(2, '0')}::1`, n++), 200);
  assert.equal(await stream('2001:db8:0:ff00::1', n++), 429, 'the 41st from one /48, from a /56 that holds none');
  // outside the /48, and IPv4 clients, are not affected
  assert.equal(await stream('2001:db8:1::1', n++), 200, 'a neighbouring /48');
  assert.equal(await stream('198.51.100.7', n++), 200, 'an IPv4 client');
  // closing streams frees the slots of every width
  const before = open.length;
  const closing = open.splice(0, 10); // the ten of 2001:db8:0:100::/64
  const ports = closing.map((r) => r.socket?.localPort ?? 0);
  for (const r of closing) r.destroy();
  await until(() => ports.every((p) => closedPorts.has(p)), 'the server saw the ten streams close');
  assert.equal(await stream('2001:db8:0:100::77', n++), 200, 'a slot of the /64, the /56 and the /48 came back');
  assert.equal(open.length, before - 10 + 1);
});
