// The page's own requests (create, list, delete, empty, source, row previews, body search) are
// /api/v1 requests of the web caller: counted in the IP's web bucket, never in the API quota, so a
// person who only browses is never told to mint a key, and a 429 says when to try again. The web
// caller covers only what the page does; cross-site requests never spend its bucket and requests an
// email could make (an image) are refused. In Chromium: each row shows a one-line preview, the code as a badge, and a
// marker when attachments were not kept; the search box finds words that are only in the body.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { WEB_LIMITS } from '../../src/web/security.ts';
import { midMinuteClock } from '../helpers/time.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { DESKTOP, launchChromium } from './browser.ts';

let svc: TestService;
let browser: Browser;
let page: Page;

before(async () => {
  // a mid-minute clock: the quota's minute cannot turn between spending it and the checks (a straddle reset it)
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '3', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000' }, { clock: midMinuteClock() });
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: DESKTOP })).newPage();
});
after(async () => {
  await browser?.close().catch(() => undefined);
  await svc?.stop();
});

/** A request as the page's script makes it: the browser marks it same-origin (Sec-Fetch-Site). */
const fromPage = (path: string, init: RequestInit = {}) => svc.api(path, { ...init, headers: { 'sec-fetch-site': 'same-origin', ...(init.headers as Record<string, string>) } });

test('page actions use the web bucket: the API quota is spent, the page still creates, lists, reads the source, deletes and empties, through /api/v1', async () => {
  const box = `acts${Date.now()}@ephemail.test`;
  await svc.send({ to: box, subject: 'one', text: 'first' });
  await svc.send({ to: box, subject: 'two', text: 'second' });
  // the API quota of this IP (3 a minute) is used up
  for (let i = 0; i < 4; i++) await svc.api('/api/v1/domains');
  assert.equal((await svc.api('/api/v1/domains')).status, 429);
  assert.equal((await svc.api(`/api/v1/inboxes/${box}/emails`)).status, 429, 'a script (no same-origin mark) pays from the API quota');

  const created = await fromPage('/api/v1/inboxes', { method: 'POST' });
  assert.equal(created.status, 201);
  assert.equal(created.headers.get('ratelimit-limit'), String(WEB_LIMITS.perMinute), 'counted in the web bucket');
  assert.match((await created.json()).data.address, /^[a-z0-9]{10}@ephemail\.test$/);
  const listed = await (await fromPage(`/api/v1/inboxes/${box}/emails?limit=100`)).json();
  assert.deepEqual(listed.data.map((e: { subject: string }) => e.subject), ['two', 'one']);
  const id = listed.data[0].id;
  const raw = await fromPage(`/api/v1/emails/${id}/raw`);
  assert.equal(raw.status, 200);
  assert.equal(raw.headers.get('content-type'), 'message/rfc822');
  assert.equal(raw.headers.get('content-disposition'), `attachment; filename="${id}.eml"`);
  assert.match(await raw.text(), /Subject: two/);
  assert.equal((await fromPage(`/api/v1/emails/${id}`, { method: 'DELETE' })).status, 204);
  assert.equal((await fromPage(`/api/v1/emails/${id}`, { method: 'DELETE' })).status, 404);
  const emptied = await fromPage(`/api/v1/inboxes/${box}/emails`, { method: 'DELETE' });
  assert.deepEqual(await emptied.json(), { data: { address: box, deleted: 1 } });
});

test('the web caller gets no more than the page does: a chosen address, a held wait, other filters, keys and /me are ordinary anonymous requests', async () => {
  const anon = String(svc.service.core.config.anon.perMinute);
  const json = { 'content-type': 'application/json' };
  const notThePage: [string, RequestInit?][] = [
    ['/api/v1/inboxes', { method: 'POST', headers: json, body: JSON.stringify({ local_part: `chosen${Date.now()}` }) }],
    ['/api/v1/inboxes/x@ephemail.test/emails?wait=5'],
    ['/api/v1/inboxes/x@ephemail.test/emails?from=a'],
    ['/api/v1/inboxes/x@ephemail.test/latest'],
    ['/api/v1/keys', { method: 'POST' }],
    ['/api/v1/domains'],
  ];
  for (const [path, init] of notThePage) {
    const res = await fromPage(path, init);
    await res.arrayBuffer();
    assert.equal(res.headers.get('ratelimit-limit'), anon, `${init?.method ?? 'GET'} ${path} pays from the API quota`);
  }
  const me = await fromPage('/api/v1/me');
  assert.equal((await me.json()).data.kind, 'anonymous', '/me never reports a web caller');
  const stream = await fromPage('/api/v1/inboxes/x@ephemail.test/events?since=not-a-uuid');
  assert.equal(stream.status, 400, 'the page\'s stream is checked like any other');
});

test('the web bucket has its own limit, and its 429 (the API\'s envelope) says when to try again, not how to mint a key', async () => {
  assert.deepEqual(WEB_LIMITS, { perMinute: 300, perDay: 20_000 });
  // the limiter's windows are fixed minutes: 301 requests must not straddle a boundary
  const svc2 = await startService({}, { clock: midMinuteClock() });
  try {
    let last: Response | null = null;
    for (let i = 0; i <= WEB_LIMITS.perMinute; i++) {
      last = await svc2.api('/api/v1/inboxes/x@ephemail.test/emails?limit=100', { headers: { 'sec-fetch-site': 'same-origin' } });
      if (last.status === 429) break;
      await last.arrayBuffer();
    }
    assert.equal(last!.status, 429);
    assert.ok(Number(last!.headers.get('retry-after')) >= 1);
    const body = await last!.json();
    assert.equal(body.error.type, 'rate_limited');
    assert.match(body.error.message, /try again in \d+ s/);
    assert.doesNotMatch(body.error.message, /key/i);
    assert.match(body.error.docs, /\/docs#error-rate_limited$/, 'the API error envelope');
    assert.equal((await svc2.api('/api/v1/domains')).status, 200, 'the API quota is untouched');
    const pageLoad = await svc2.api('/');
    assert.equal(pageLoad.status, 429, 'pages count in the same web bucket');
  } finally {
    await svc2.stop();
  }
});

test('a cross-site request never spends the reader\'s web bucket, and a request an email could make (an image) is refused', async () => {
  const box = `csrf${Date.now()}@ephemail.test`;
  await svc.send({ to: box, subject: 'keep me', text: 'x' });
  // another site's script is an anonymous API caller like any other: counted in the API quota (3 a minute here)
  for (const site of ['cross-site', 'same-site']) {
    const cross = await svc.api(`/api/v1/inboxes/${box}/emails`, { headers: { 'sec-fetch-site': site } });
    assert.equal(cross.headers.get('ratelimit-limit'), '3', site);
  }
  const image = await fromPage(`/api/v1/inboxes/${box}/emails`, { method: 'DELETE', headers: { 'sec-fetch-dest': 'image' } });
  assert.equal(image.status, 400);
  assert.equal((await image.json()).error.type, 'invalid_request');
  assert.equal(image.headers.get('ratelimit-limit'), null, 'refused before it is counted');
  assert.equal((await (await fromPage(`/api/v1/inboxes/${box}/emails`)).json()).data.length, 1, 'nothing was deleted');
});

test('the list shows a preview line, the code as a badge and a marker for attachments not kept; search finds body words', async () => {
  const box = `rows${Date.now()}@ephemail.test`;
  await svc.send({ to: box, subject: 'Verify your account', text: 'Hello! Your verification code is 730418. It expires in 10 minutes.' });
  await svc.send({ to: box, subject: 'Big files', text: 'The files you asked for are attached.', attachments: [{ filename: 'big.bin', content: Buffer.alloc(5 * 1024 * 1024 + 10, 1) }] });
  await svc.send({ to: box, subject: 'Newsletter', html: '<p>Our <b>pumpkin</b> recipes this week.</p>' });
  await svc.send({ to: box, subject: 'Long read', text: `${'Lorem ipsum dolor sit amet. '.repeat(30)}The secret ingredient is zucchini.` });
  await page.goto(`${svc.http}/inbox/${box}`);
  await page.waitForFunction(() => document.querySelectorAll('#emails li').length === 4);
  const row = (subject: string) => page.locator('#emails li', { hasText: subject });
  await row('Verify your account').locator('.code-badge').waitFor();
  assert.equal(await row('Verify your account').locator('.code-badge').innerText(), '730418');
  assert.match(await row('Verify your account').locator('.preview').innerText(), /^Hello! Your verification code is 730418/);
  await row('Big files').locator('.dropped').waitFor();
  assert.equal(await row('Big files').locator('.dropped').innerText(), '1 attachment not kept');
  // "pumpkin" is in the preview of the HTML-only mail; "recipes this week" too; a word only deep in a body is found by the server
  await page.fill('#search', 'expires in 10');
  await page.waitForFunction(() => document.querySelectorAll('#emails li:not([hidden])').length === 1);
  assert.deepEqual(await page.locator('#emails li:not([hidden]) .subject').allInnerTexts(), ['Verify your account']);
  await page.fill('#search', 'pumpkin');
  await page.waitForFunction(() => document.querySelectorAll('#emails li:not([hidden])').length === 1);
  assert.deepEqual(await page.locator('#emails li:not([hidden]) .subject').allInnerTexts(), ['Newsletter']);
  // a word far past the preview is found by the server (the API's text filter)
  await page.fill('#search', 'zucchini');
  await page.waitForFunction(() => document.querySelectorAll('#emails li:not([hidden])').length === 1);
  assert.deepEqual(await page.locator('#emails li:not([hidden]) .subject').allInnerTexts(), ['Long read']);
  assert.equal(await row('Newsletter').isVisible(), false, 'rows that do not match are not drawn');
  assert.doesNotMatch(await row('Long read').locator('.preview').innerText(), /zucchini/, 'not in the preview');
  await page.fill('#search', '');
});

test('the Links tab lists every link with its kind, and shows where a tracked link really goes; attachments download from the page', async () => {
  const box = `links${Date.now()}@ephemail.test`;
  await svc.send({
    to: box, subject: 'Links inside', text: 'see html',
    html: '<p><a href="https://click.mailer.example/track?u=42&url=https%3A%2F%2Fapp.example%2Fverify%3Ft%3Dabc">Verify your email</a></p><p><a href="https://news.example/unsubscribe">Unsubscribe</a></p>',
    attachments: [{ filename: 'notes.txt', content: 'hello notes' }],
  });
  await page.goto(`${svc.http}/inbox/${box}`);
  await page.locator('#emails li', { hasText: 'Links inside' }).locator('a').first().click();
  await page.waitForURL(/\/inbox\/.+\/[0-9a-f-]{36}$/);
  await page.getByRole('tab', { name: /^Links \(2\)$/ }).click();
  const items = page.locator('#panel-links .links li');
  assert.equal(await items.count(), 2);
  const verify = items.filter({ hasText: 'Verify your email' });
  assert.equal(await verify.locator('.link-kind').innerText(), 'Verify');
  assert.match(await verify.locator('.tracked').innerText(), /click counter, then to https:\/\/app\.example\/verify\?t=abc/);
  assert.equal(await verify.locator('.link-url').getAttribute('rel'), 'noopener noreferrer nofollow');
  assert.equal(await items.filter({ hasText: 'Unsubscribe' }).locator('.tracked').count(), 0, 'a direct link is not marked tracked');
  const href = await page.locator('a.download', { hasText: 'notes.txt' }).getAttribute('href');
  assert.match(href ?? '', /^\/api\/v1\/emails\/[0-9a-f-]+\/attachments\//);
  const dl = await fromPage(href!);
  assert.equal(dl.status, 200);
  assert.equal(await dl.text(), 'hello notes');
  assert.match(dl.headers.get('content-disposition') ?? '', /^attachment; filename="notes\.txt"/);
  assert.equal(dl.headers.get('x-content-type-options'), 'nosniff');
});
