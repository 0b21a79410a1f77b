// The inbox page's event stream (the API's, GET /api/v1/inboxes/{address}/events, as the web caller):
// bounded lifetime, the page reconnects and catches up, the per-IP cap, and shutdown ends held
// streams (no hang).
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { HTTP_TIMEOUTS } from '../../src/http/app.ts';
import { STREAMS_PER_IP } from '../../src/web/security.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { launchChromium } from './browser.ts';

let svc: TestService;
let browser: Browser;
let page: Page;

before(async () => {
  svc = await startService({}, { httpTimeouts: { ...HTTP_TIMEOUTS, pageStreamMs: 1200 } });
  browser = await launchChromium();
  page = await browser.newPage();
});

after(async () => {
  await browser?.close().catch(() => undefined);
  await svc?.stop();
});

test('streams end after their lifetime; the page reconnects by itself and still shows new mail live', async () => {
  const address = 'reconnect@ephemail.test';
  let opened = 0;
  page.on('request', (r) => r.url().includes(`/api/v1/inboxes/${encodeURIComponent(address)}/events`) && opened++);
  await page.goto(`${svc.http}/inbox/${address}`);
  await page.evaluate(() => ((window as any).__noReload = true));
  await page.locator('#status-text', { hasText: 'Live' }).waitFor();
  await until(() => opened >= 2, 'the page reconnected after its stream ended (streams live 1.2 s)');
  await svc.send({ to: address, subject: 'After reconnects', text: 'r' });
  await page.locator('#emails li', { hasText: 'After reconnects' }).waitFor({ timeout: 2000 });
  assert.equal(await page.evaluate(() => (window as any).__noReload), true);
  assert.equal(await page.locator('#emails li').count(), 1, 'a reconnect snapshot does not duplicate rows');
});

/** The page's stream of an inbox. */
const streamUrl = (base: string, address: string) => `${base}/api/v1/inboxes/${address}/events`;
/** As the page's browser sends it: same-origin (the web caller). */
const PAGE = { 'sec-fetch-site': 'same-origin' };

/** Opens a raw stream with node:http (closing it closes the socket, as a browser does). */
function openStream(url: string): Promise<{ status: number; retryAfter: string | undefined; localPort: number; close(): void }> {
  return new Promise((done, fail) => {
    const req = get(url, { headers: PAGE, agent: false }, (res) => {
      res.on('error', () => undefined);
      done({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, localPort: req.socket?.localPort ?? 0, close: () => req.destroy() });
    });
    req.on('error', fail);
  });
}

/** The client ports whose connections the service's HTTP server has seen closed (a stream's slot frees then). */
function serverClosedPorts(service: TestService): Set<number> {
  const closed = new Set<number>();
  service.service.app.server.on('connection', (socket) => {
    const port = socket.remotePort;
    socket.once('close', () => port && closed.add(port));
  });
  return closed;
}

test(`more than ${STREAMS_PER_IP} streams from one IP are refused with 429; closing one frees a slot`, async () => {
  // a service of its own: streams of the default lifetime (those of `svc` end after 1.2 s, maybe while
  // the slots are still being filled on a loaded machine) and no page holding one
  const own = await startService();
  try {
    const url = streamUrl(own.http, 'cap@ephemail.test');
    const closedPorts = serverClosedPorts(own);
    const opened: Awaited<ReturnType<typeof openStream>>[] = [];
    for (let i = 0; i < STREAMS_PER_IP + 2; i++) opened.push(await openStream(url));
    const ok = opened.filter((r) => r.status === 200).length;
    const refused = opened.filter((r) => r.status === 429);
    assert.deepEqual([ok, refused.length], [STREAMS_PER_IP, 2], `${ok} accepted, ${refused.length} refused`);
    assert.equal(refused[0].retryAfter, '10');
    for (const r of opened) r.close();
    // not polled by opening (each attempt would count against the web bucket): the server saw the closes
    await until(() => opened.every((r) => closedPorts.has(r.localPort)), 'the server saw every stream close');
    const again = await openStream(url);
    assert.equal(again.status, 200);
    again.close();
  } finally {
    await own.stop();
  }
});

test('with every stream slot of its network taken, the page still lists the inbox (from the API) and says it is not live', async () => {
  const own = await startService(); // streams of the default lifetime: the held ones stay
  const address = 'refused@ephemail.test';
  const held = [];
  const p = await browser.newPage();
  try {
    await own.send({ to: address, subject: 'Listed without a stream', text: 'x' });
    for (let i = 0; i < STREAMS_PER_IP + 1; i++) held.push(await openStream(streamUrl(own.http, `other${i}@ephemail.test`)));
    assert.ok(held.some((r) => r.status === 429), 'the cap is reached');
    await p.goto(`${own.http}/inbox/${address}`);
    await p.locator('#emails li', { hasText: 'Listed without a stream' }).waitFor({ timeout: 5000 });
    await p.locator('#status-text', { hasText: 'Not live' }).waitFor({ timeout: 5000 });
  } finally {
    await p.close();
    for (const r of held) r.close();
    await own.stop();
  }
});

test('a malformed address or a foreign domain gets no stream', async () => {
  assert.equal((await fetch(streamUrl(svc.http, 'not-an-address'), { headers: PAGE })).status, 400);
  assert.equal((await fetch(streamUrl(svc.http, 'a@elsewhere.test'), { headers: PAGE })).status, 404);
});

test('stop() ends held streams promptly', async () => {
  await browser.close();
  let ended = false;
  // resolves with the response head: the server holds the stream from then on
  await new Promise<void>((open, fail) => {
    const req = get(streamUrl(svc.http, 'stop@ephemail.test'), { headers: PAGE }, (res) => {
      assert.equal(res.statusCode, 200);
      open();
      res.on('data', () => undefined);
      res.on('end', () => (ended = true));
      res.on('error', () => (ended = true));
    });
    req.on('error', fail);
  });
  const t0 = performance.now();
  await svc.stop();
  // bound: stop() does not wait out the stream's lifetime (minutes); one-sided and generous for a loaded machine
  assert.ok(performance.now() - t0 < 10_000, `stopped in ${Math.round(performance.now() - t0)} ms`);
  await until(() => ended, 'the server ended the stream', 5000);
  svc = undefined as unknown as TestService;
});
