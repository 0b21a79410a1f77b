// A hostile email opened in real Chromium: nothing in it runs and nothing
// loads. Twice: once through the whole pipeline (SMTP → sanitizer → frame), once stored raw past the
// sanitizer, which proves the frame's sandbox and CSP hold on their own. The assertions are on a
// flag each script would set and on every request the browser made, with a recording HTTP server
// standing in for the attacker; loading remote images on request is the positive control that shows
// the recorder would have seen a leak.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { launchChromium, screenshots, sleep, startRecorder, type Recorder } from './browser.ts';
import type { MessageViews } from '../../src/domain/message.ts';
import { minimalMessage } from '../../src/derive/message.ts';
import { viewsOf } from '../../src/derive/views.ts';

let svc: TestService;
let browser: Browser;
let rec: Recorder;

before(async () => {
  svc = await startService();
  rec = await startRecorder();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close().catch(() => undefined);
  await rec?.close();
  await svc?.stop();
});

/** Every trick that would set `__pwned` (on any window it can reach) or call the recorder. */
function hostileHtml(r: string): string {
  const flag = (v: string) => `try{top.__pwned='${v}'}catch(e){};try{parent.__pwned='${v}'}catch(e){};window.__pwned='${v}';document.documentElement.setAttribute('data-pwned','${v}')`;
  return `<html><head>
<meta http-equiv="refresh" content="0;url=${r}/meta-refresh">
<meta http-equiv="Content-Security-Policy" content="default-src *; script-src * 'unsafe-inline'">
<base href="${r}/base/">
<link rel="stylesheet" href="${r}/link-stylesheet">
<link rel="prefetch" href="${r}/link-prefetch">
<link rel="dns-prefetch" href="${r}/dns-prefetch">
<script>${flag('script')};fetch('${r}/script-fetch')</script>
<script src="${r}/script-src.js"></script>
<style>@import url("${r}/css-import"); body{background:url("${r}/css-background")} @font-face{font-family:evil;src:url("${r}/css-font")} .f{font-family:evil}</style>
</head><body onload="${flag('body-onload')}">
<h1 id="hello">Hostile mail</h1>
<p class="f">font</p>
<img id="pixel" src="${r}/pixel.gif" alt="tracking pixel" width="1" height="1">
<img src="${r}/srcset-1x.gif" srcset="${r}/srcset-2x.gif 2x" alt="">
<img src="does-not-exist" onerror="${flag('onerror')};new Image().src='${r}/onerror'">
<a id="jslink" href="javascript:${flag('javascript-link')};void(new Image().src='${r}/javascript-link')">javascript link</a>
<a id="datalink" href="data:text/html,<script>opener.__pwned='data-link'</script>">data link</a>
<a id="relative" href="relative-page">relative link (base href)</a>
<form id="form" action="${r}/form" method="post"><input name="q" value="1"><button id="formsubmit" type="submit">Submit</button></form>
<svg xmlns="http://www.w3.org/2000/svg" onload="${flag('svg-onload')}"><script>${flag('svg-script')}</script><image href="${r}/svg-image"/><a href="javascript:${flag('svg-link')}"><text y="20">svg link</text></a></svg>
<math><mtext><table><mglyph><style><img src=x onerror="${flag('mxss')}"></style></mglyph></table></mtext></math>
<noscript><p title="</noscript><img src=x onerror=${flag('noscript')}>"></p></noscript>
<iframe src="${r}/iframe"></iframe>
<iframe srcdoc="<script>${flag('srcdoc')}</script>"></iframe>
<object data="${r}/object"></object><embed src="${r}/embed">
<video poster="${r}/video-poster" src="${r}/video"></video><audio src="${r}/audio" autoplay></audio>
<div style="background-image:url('${r}/inline-style')">styled</div>
<table background="${r}/table-background"><tr><td>t</td></tr></table>
<details open ontoggle="${flag('ontoggle')}"><summary>d</summary></details>
<input autofocus onfocus="${flag('onfocus')}">
<a href="https://example.com/" ping="${r}/ping">pinged link</a>
</body></html>`;
}

const SVG = `<svg xmlns="http://www.w3.org/2000/svg"><script>top.__pwned='svg-attachment'</script></svg>`;
const HTML_ATT = `<script>top.__pwned='html-attachment';fetch('/api/v1/me')</script>`;

interface Watch {
  context: BrowserContext;
  page: Page;
  /** Every request the browser started (Chromium reports a request before CSP blocks it). */
  requests: string[];
  /** Requests that got a response (reached a server). */
  answered: string[];
  /** Requests that failed, with the browser's reason. */
  failed: { url: string; reason: string }[];
  popups: Page[];
}

async function open(): Promise<Watch> {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  const w: Watch = { context, page, requests: [], answered: [], failed: [], popups: [] };
  context.on('request', (r: Request) => w.requests.push(r.url()));
  context.on('response', (r) => w.answered.push(r.url()));
  context.on('requestfailed', (r: Request) => w.failed.push({ url: r.url(), reason: r.failure()?.errorText ?? '' }));
  context.on('page', (p) => p !== page && w.popups.push(p));
  return w;
}

async function pwned(w: Watch): Promise<unknown[]> {
  const flags: unknown[] = [await w.page.evaluate(() => (window as any).__pwned)];
  for (const f of w.page.frames()) {
    flags.push(await f.locator('html').getAttribute('data-pwned').catch(() => null));
  }
  return flags.filter((v) => v !== undefined && v !== null);
}

/** Opens the email view and pokes at every trigger a user could hit. */
async function exercise(w: Watch, address: string, id: string) {
  const { page } = w;
  const res = await page.goto(`${svc.http}/inbox/${address}/${id}`);
  assert.equal(res?.status(), 200);
  const frame = page.frameLocator('iframe#body-frame');
  await frame.locator('#hello').waitFor();
  await sleep(1500); // quiet window: a 0-second meta refresh, timers and lazy loads would have fired by now
  const bodyFrame = page.frames().find((f) => f.url().includes('/web/frames/'));
  assert.ok(bodyFrame, 'the frame is still the email frame (no meta refresh, no navigation)');
  assert.match(bodyFrame.url(), new RegExp(`/web/frames/${id}$`));
  for (const sel of ['#jslink', '#formsubmit', 'svg a']) {
    const el = frame.locator(sel);
    if ((await el.count()) > 0) await el.first().click({ timeout: 2000 }).catch(() => undefined);
  }
  await sleep(700); // quiet window: what the clicks set off (navigation, submit, popup) would happen in these 700 ms
}

const isForeign = (u: string) => !u.startsWith(svc.http) && !u.startsWith('data:') && u !== 'about:blank';

/**
 * Nothing reached the recorder; every foreign request the page started was refused by the browser
 * itself (CSP) and none got a response; no unexpected same-origin request (base href, relative loads).
 */
function assertNothingLeaked(w: Watch, label: string): string[] {
  assert.deepEqual(rec.hits, [], `${label}: the recording server got no request`);
  assert.deepEqual(w.answered.filter(isForeign), [], `${label}: no foreign request got a response`);
  const attempted = w.requests.filter(isForeign);
  for (const u of attempted) {
    const f = w.failed.find((x) => x.url === u);
    assert.ok(f && /^csp$|BLOCKED_BY_CSP/i.test(f.reason), `${label}: ${u} was blocked in the browser (${f?.reason ?? 'no failure recorded'})`);
  }
  const allowed = /^\/(inbox\/|web\/(assets|frames|events)\/|api\/v1\/emails\/)/;
  const odd = w.requests.filter((u) => u.startsWith(svc.http) && !allowed.test(new URL(u).pathname));
  assert.deepEqual(odd, [], `${label}: no unexpected same-origin request (base href, relative loads)`);
  return attempted;
}

test('a hostile email through SMTP: nothing executes, nothing loads, until remote images are asked for', async () => {
  const address = 'victim@ephemail.test';
  await svc.send({
    to: address,
    from: '"<img src=x onerror=top.__pwned=1>" <evil@attacker.example>',
    subject: '<script>top.__pwned="subject"</script><img src=x onerror=top.__pwned="subject-img">',
    html: hostileHtml(rec.url),
    text: `plain <script>top.__pwned='text'</script> ${rec.url}/text-link`,
    attachments: [
      { filename: 'evil.svg', content: SVG, contentType: 'image/svg+xml' },
      { filename: 'evil.html', content: HTML_ATT, contentType: 'text/html' },
      { filename: '<img src=x onerror=top.__pwned=9>.txt', content: 'x', contentType: 'text/plain' },
    ],
  });
  const list = await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json();
  const id = list.data[0].id as string;
  const w = await open();
  await exercise(w, address, id);
  assert.deepEqual(await pwned(w), []);
  assertNothingLeaked(w, 'sanitized');
  assert.equal(w.popups.length, 0, 'no window was opened');
  // the subject, sender and file names are text, not markup
  assert.match(await w.page.locator('h1.subject').innerText(), /<script>top\.__pwned="subject"<\/script>/);
  assert.match(await w.page.locator('#meta').innerText(), /<img src=x onerror=top\.__pwned=1>/);
  assert.match(await w.page.locator('.attachments').innerText(), /<img src=x onerror=top\.__pwned=9>\.txt/);
  await screenshots(w.page, 'email-hostile');
  // the plain-text tab shows markup as text; a URL in it is a link, not a load
  await w.page.click('#tab-text');
  assert.match(await w.page.locator('#panel-text pre').innerText(), /plain <script>top\.__pwned='text'<\/script>/);
  assert.equal(await w.page.locator('#panel-text pre a').getAttribute('href'), `${rec.url}/text-link`);
  await w.page.click('#tab-html');

  // the HTML and SVG attachments download; neither is rendered on the service's origin
  for (const name of ['evil.html', 'evil.svg']) {
    const [download] = await Promise.all([w.page.waitForEvent('download'), w.page.locator('a.download', { hasText: name }).click()]);
    assert.equal(download.suggestedFilename(), name);
  }
  assert.equal(w.page.url(), `${svc.http}/inbox/${address}/${id}`);
  assert.deepEqual(await pwned(w), []);

  // positive control: asking for remote images loads them, so the recorder would have seen a leak
  await w.page.click('#load-images');
  await w.page.frameLocator('iframe#body-frame').locator('#hello').waitFor();
  await until(() => rec.hits.some((h) => h.includes('/pixel.gif')), 'the pixel loads once asked for', 5000, 50);
  assert.ok(rec.hits.some((h) => h === 'GET /pixel.gif'), `the pixel loads once asked for: ${JSON.stringify(rec.hits)}`);
  // still nothing but images: no script, no CSS import, font, frame, form or prefetch
  assert.deepEqual(rec.hits.filter((h) => !/\.gif$|\/css-background$|\/inline-style$|\/table-background$/.test(h)), []);
  assert.deepEqual(await pwned(w), []);
  await w.context.close();
  rec.hits.length = 0;
});

test('the same email stored raw, past the sanitizer: the frame alone keeps it inert', async (t) => {
  const address = 'raw@ephemail.test';
  const now = Date.now();
  const { store } = svc.service.core;
  const [stored] = await store.addEmails([{
    address,
    sender: 'Raw <raw@attacker.example>',
    mailedBy: 'attacker.example',
    subject: 'Unsanitized body',
    hasAttachments: false,
    raw: Buffer.from('Subject: Unsanitized body\r\n\r\n'),
    receivedAt: now,
    expiresAt: now + 3_600_000,
  }]);
  // views written directly, as if the derivation had let the markup through
  // (every view of the registry at its fallback, so the document is current: it is read, not derived again)
  const views: MessageViews = {
    ...viewsOf(minimalMessage(Buffer.from('Subject: Unsanitized body\r\n\r\n'))).views,
    to: address, headers: [{ name: 'Subject', value: 'Unsanitized body' }], textBody: null, htmlBody: hostileHtml(rec.url), outcome: 'ok',
  };
  await store.putViews((await store.getEmail(stored.id, now))!.messageKey, JSON.stringify(views), []);
  const w = await open();
  await exercise(w, address, stored.id);
  // the raw markup really is there (the sanitizer did not run): the frame holds the script elements
  const frame = w.page.frames().find((f) => f.url().includes('/web/frames/'))!;
  assert.ok((await frame.locator('script').count()) >= 2, 'the script elements are in the frame, inert');
  assert.ok((await frame.locator('form').count()) === 1);
  assert.deepEqual(await pwned(w), []);
  const blocked = assertNothingLeaked(w, 'raw');
  t.diagnostic(`${blocked.length} remote loads attempted and blocked by CSP; ${w.popups.length} popups`);
  for (const p of w.popups) assert.ok(!p.url().startsWith(svc.http), `no popup on the service's origin: ${p.url()}`);
  await screenshots(w.page, 'email-hostile-raw');

  // opened directly as a top-level page, the frame document is still sandboxed by its own CSP
  const direct = await w.context.newPage();
  const res = await direct.goto(`${svc.http}/web/frames/${stored.id}`);
  assert.match(res!.headers()['content-security-policy'], /^default-src 'none'; .*sandbox allow-same-origin allow-popups allow-popups-to-escape-sandbox$/);
  assert.doesNotMatch(res!.headers()['content-security-policy'], /allow-scripts|script-src/, 'the frame never gets script');
  await sleep(800); // quiet window: a script that ran would mark the page or load something in these 800 ms
  assert.equal(await direct.locator('html').getAttribute('data-pwned'), null);
  assert.deepEqual(rec.hits, [], 'the direct frame page loaded nothing remote');
  assert.match(direct.url(), /\/web\/frames\//);

  // negative control: the same markup in an ordinary page does run and does call out, so the
  // flag and the recorder above would have caught a leak
  const control = await w.context.newPage();
  await control.setContent(hostileHtml(rec.url).replace(/<meta http-equiv="refresh"[^>]*>/, ''), { waitUntil: 'load' });
  await until(async () => rec.hits.length > 0 && (await control.evaluate(() => typeof (window as any).__pwned)) === 'string', 'the unprotected page ran its script and called the recorder', 5000);
  rec.hits.length = 0;
  await w.context.close();
});

test('headers: pages and frames carry their CSP; downloads never render', async () => {
  const page = await svc.api('/');
  const origin = svc.http;
  assert.equal(page.headers.get('content-security-policy'), `default-src 'none'; script-src ${origin}/web/assets/; style-src ${origin}/web/assets/; img-src data:; connect-src 'self'; frame-src ${origin}/web/frames/; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`, 'script only from the asset path, never an attachment URL; images only data: (an email\'s page adds its own image route: phone.test.ts)');
  assert.equal(page.headers.get('x-frame-options'), 'DENY');
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  const list = await (await svc.api('/api/v1/inboxes/victim@ephemail.test/emails')).json();
  const id = list.data[0].id;
  const frame = await svc.api(`/web/frames/${id}`);
  assert.equal(frame.headers.get('content-security-policy'), `default-src 'none'; style-src 'unsafe-inline'; img-src ${svc.http}/web/frames/${id}/cid/ data:; form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox allow-same-origin allow-popups allow-popups-to-escape-sandbox`, 'images only from this email\'s own cid route: never the API; no script (allow-same-origin only lets the page measure the frame: docs/web.md)');
  assert.equal(frame.headers.get('referrer-policy'), 'no-referrer');
  const withImages = await svc.api(`/web/frames/${id}?images=1`);
  assert.match(withImages.headers.get('content-security-policy')!, /img-src \S+\/cid\/ data: http: https:;/);
  // with remote images allowed, http: covers our own origin too: the API refuses image loads itself, uncounted
  const before = Number((await svc.api('/api/v1/domains')).headers.get('ratelimit-remaining'));
  const asImage = await svc.api('/api/v1/domains?1', { headers: { 'sec-fetch-dest': 'image', 'sec-fetch-site': 'same-origin' } });
  assert.equal(asImage.status, 400);
  assert.equal((await asImage.json()).error.type, 'invalid_request');
  const after = Number((await svc.api('/api/v1/domains')).headers.get('ratelimit-remaining'));
  assert.equal(after, before - 1, 'the refused image load was not counted');
  const email = await (await svc.api(`/api/v1/emails/${id}`)).json();
  const svg = email.data.attachments.find((a: any) => a.filename === 'evil.svg');
  // the cid route serves raster images only: an SVG attachment is never an inline image
  assert.equal((await svc.api(`/web/frames/${id}/cid/${svg.id}`)).status, 404);
  const dl = await svc.api(`/api/v1/emails/${id}/attachments/${svg.id}`);
  assert.match(dl.headers.get('content-disposition')!, /^attachment;/);
  assert.equal(dl.headers.get('content-security-policy'), 'sandbox');
});
