// The web pages in real headless Chromium: create an inbox from `/`, mail sent over SMTP
// appears without a reload, open it, download an attachment, delete it, empty the inbox; keyboard
// use; weight; screenshots of every page at desktop and phone width.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, type TestService } from '../helpers/service.ts';
import { DESKTOP, launchChromium, screenshots } from './browser.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const consoleErrors: string[] = [];

before(async () => {
  svc = await startService();
  browser = await launchChromium();
  context = await browser.newContext({ viewport: DESKTOP, acceptDownloads: true });
  page = await context.newPage();
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
});

after(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close().catch(() => undefined);
  await svc?.stop();
});

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAKElEQVR42mNkYPhfz0AEYBxVSF+FjP8ZiDKQcVQhfRUyjiqkr0IGAIs7Cx0aU5ZYAAAAAElFTkSuQmCC',
  'base64',
);

let address = '';

test('/ explains the service, lists the domains, creates a random inbox and opens it', async () => {
  const res = await page.goto(`${svc.http}/`);
  assert.equal(res?.status(), 200);
  assert.match(res!.headers()['content-security-policy'], /default-src 'none'; script-src http:\/\/[^ ]+\/web\/assets\//);
  assert.match(await page.locator('h1').innerText(), /Disposable inboxes/);
  assert.match(await page.locator('.domains').innerText(), /ephemail\.test/);
  await screenshots(page, 'home');
  await page.click('#create');
  await page.waitForURL(/\/inbox\/[a-z0-9]{10}@ephemail\.test$/);
  address = (await page.locator('#address').innerText()).trim();
  assert.match(address, /^[a-z0-9]{10}@ephemail\.test$/);
  assert.equal(new URL(page.url()).pathname, `/inbox/${address}`);
  await page.locator('#status-text', { hasText: 'Live' }).waitFor({ timeout: 5000 });
  assert.equal(await page.locator('#empty-state').isVisible(), true);
  await screenshots(page, 'inbox-empty');
});

test('the field on / opens any address, also a bare name at the default domain', async () => {
  const other = await context.newPage();
  await other.goto(`${svc.http}/`);
  await other.fill('#open-address', 'Some.Name');
  await other.keyboard.press('Enter');
  await other.waitForURL(/\/inbox\/some\.name@ephemail\.test$/);
  assert.equal((await other.locator('#address').innerText()).trim(), 'some.name@ephemail.test');
  await other.goto(`${svc.http}/open?address=${encodeURIComponent('x@not-ours.test')}`);
  assert.match(await other.locator('h1').innerText(), /Not found/);
  await other.close();
});

let emailId = '';

test('mail sent over SMTP appears within two seconds, without a reload, newest first', async () => {
  await page.evaluate(() => ((window as any).__noReload = true));
  // the page's own /api/v1 requests (row previews) are the web caller's: none lists the inbox, none spends the API quota
  const apiCalls: { path: string; limit: string | undefined }[] = [];
  const onResponse = (r: import('playwright-core').Response) => {
    if (r.url().includes('/api/')) apiCalls.push({ path: new URL(r.url()).pathname, limit: r.headers()['ratelimit-limit'] });
  };
  page.on('response', onResponse);
  await svc.send({ to: address, from: 'Alice Example <alice@example.org>', subject: 'First message', text: 'one' });
  const t0 = Date.now();
  await page.locator('#emails li', { hasText: 'First message' }).waitFor({ timeout: 2000 });
  const elapsed = Date.now() - t0;
  await svc.send({
    to: address,
    from: 'Bob Builder <bob@example.net>',
    subject: 'Your invoice',
    text: 'Hello,\nsee https://example.net/invoice for details.\n',
    html: '<h2>Invoice</h2><p>Hello, please find <b>the invoice</b> attached.</p><p><img src="cid:logo.png" alt="logo" width="16" height="16"></p>',
    attachments: [
      { filename: 'invoice.txt', content: 'amount: 42 EUR\n', contentType: 'text/plain' },
      { filename: 'logo.png', content: PNG, contentType: 'image/png', cid: 'logo.png' },
    ],
  });
  const t1 = Date.now();
  await page.locator('#emails li', { hasText: 'Your invoice' }).waitFor({ timeout: 2000 });
  // bound: live within two seconds (the waits above fail past it); one-sided
  assert.ok(Date.now() - t1 < 2000 && elapsed < 2000);
  assert.equal(await page.evaluate(() => (window as any).__noReload), true, 'the page was not reloaded');
  page.off('response', onResponse);
  assert.deepEqual(apiCalls.filter((c) => !c.path.endsWith('/previews')), [], 'new mail arrives over the event stream: no API polling');
  assert.deepEqual(apiCalls.filter((c) => c.limit !== '300'), [], 'no API quota spent: every request the page made is counted in the web bucket (300 a minute)');
  const rows = await page.locator('#emails li .subject').allInnerTexts();
  assert.deepEqual(rows.map((r) => r.replace(/ · attachment$/, '')), ['Your invoice', 'First message']);
  const first = page.locator('#emails li').first();
  assert.match(await first.locator('.from').innerText(), /Bob Builder/);
  assert.match(await first.locator('.when').innerText(), /just now|s ago/);
  assert.match(await first.locator('.ttl').innerText(), /^deleted in (?:1:00:00|59:[0-5]\d)$/);
  assert.equal(await page.locator('#count').innerText(), '2 emails');
  // the arrival highlight (a CSS animation) has faded before the screenshot
  await page.waitForFunction(() => [...document.querySelectorAll('#emails li')].every((li) => li.getAnimations().every((a) => a.playState === 'finished')));
  await screenshots(page, 'inbox');
});

test('the email view: sender, recipients, subject, headers, isolated HTML, plain text, attachments', async () => {
  await page.locator('#emails li a', { hasText: 'Your invoice' }).click();
  await page.waitForURL(/\/inbox\/.+\/[0-9a-f-]{36}$/);
  emailId = page.url().split('/').pop()!;
  assert.equal(await page.locator('h1.subject').innerText(), 'Your invoice');
  const meta = await page.locator('#meta').innerText();
  assert.match(meta, /Bob Builder <bob@example\.net>/);
  assert.match(meta, new RegExp(address.replace('.', '\\.')));
  assert.match(meta, /deleted in/);
  const frameEl = page.locator('iframe#body-frame');
  assert.equal(await frameEl.getAttribute('sandbox'), 'allow-same-origin allow-popups allow-popups-to-escape-sandbox', 'no allow-scripts: the page measures the frame, the mail runs nothing');
  const frame = page.frameLocator('iframe#body-frame');
  await frame.locator('h2', { hasText: 'Invoice' }).waitFor();
  // the cid: image is served from this service and shows (naturalWidth > 0) without remote images
  const inline = frame.locator('img[alt=logo]');
  await inline.waitFor();
  assert.match((await inline.getAttribute('src')) ?? '', /^\/web\/frames\/[0-9a-f-]+\/cid\//);
  let width = 0;
  await until(async () => (width = await inline.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))) > 0, 'the inline image loaded', 5000, 100);
  assert.equal(width, 16, 'the inline image loaded');
  await screenshots(page, 'email');

  await page.click('#tab-text');
  assert.equal(await page.locator('#panel-html').isHidden(), true);
  assert.match(await page.locator('#panel-text pre').innerText(), /see https:\/\/example\.net\/invoice for details/);
  assert.equal(await page.locator('#panel-text pre a').getAttribute('href'), 'https://example.net/invoice');
  await screenshots(page, 'email-text');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.locator('#panel-headers').isVisible(), true);
  assert.match(await page.locator('#panel-headers').innerText(), /Subject\s+Your invoice/);
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowLeft');
  assert.equal(await page.locator('#panel-html').isVisible(), true);

  const items = (await page.locator('.attachments li').allInnerTexts()).sort();
  assert.equal(items.length, 2);
  assert.match(items[0], /invoice\.txt\s+15 B · text\/plain/);
  assert.match(items[1], /logo\.png\s+96 B · image\/png/);
});

test('an attachment downloads with its name and bytes', async () => {
  const [download] = await Promise.all([page.waitForEvent('download'), page.locator('a.download', { hasText: 'invoice.txt' }).click()]);
  assert.equal(download.suggestedFilename(), 'invoice.txt');
  const path = await download.path();
  assert.equal(readFileSync(path).toString(), 'amount: 42 EUR\n');
});

test('the Source tab shows the received bytes; "Download .eml" saves them', async () => {
  const raw = Buffer.from(await (await svc.api(`/api/v1/emails/${emailId}/raw`)).arrayBuffer()).toString('utf8');
  assert.match(raw, /^Subject: Your invoice\r?$/m);
  await page.click('#tab-source');
  const pre = page.locator('#source-body');
  await page.waitForFunction(() => !document.querySelector('#source-body')?.textContent?.startsWith('Loading'));
  const shown = await pre.evaluate((el) => el.textContent ?? '');
  assert.equal(shown, raw, 'the source view is the message as received, byte for byte');
  await screenshots(page, 'email-source');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-eml')]);
  assert.equal(download.suggestedFilename(), `${emailId}.eml`);
  assert.equal(readFileSync(await download.path()).toString('utf8'), raw);
  await page.click('#tab-html');
});

test('deleting the email returns to the inbox without it; the API agrees', async () => {
  await page.click('#delete-email');
  await page.waitForURL(new RegExp(`/inbox/${address.replace('.', '\\.')}$`));
  await page.locator('#emails li', { hasText: 'First message' }).waitFor();
  assert.equal(await page.locator('#emails li', { hasText: 'Your invoice' }).count(), 0);
  assert.equal((await svc.api(`/api/v1/emails/${emailId}`)).status, 404);
  const gone = await page.goto(`${svc.http}/inbox/${address}/${emailId}`);
  assert.equal(gone?.status(), 404);
  assert.match(await page.locator('h1').innerText(), /Not found/);
  await screenshots(page, 'not-found');
  await page.goto(`${svc.http}/inbox/${address}`);
});

test('keyboard: rows, delete buttons and "empty inbox" work without a mouse', async () => {
  await page.locator('#status-text', { hasText: 'Live' }).waitFor();
  await svc.send({ to: address, subject: 'Keyboard one', text: 'k1' });
  await svc.send({ to: address, subject: 'Keyboard two', text: 'k2' });
  await page.locator('#emails li', { hasText: 'Keyboard two' }).waitFor({ timeout: 2000 });
  assert.equal(await page.locator('#emails li').count(), 3);

  // Enter on a focused row opens it; Escape goes back to the inbox
  await page.locator('#emails li a', { hasText: 'Keyboard two' }).focus();
  await page.keyboard.press('Enter');
  await page.waitForURL(/[0-9a-f-]{36}$/);
  await page.keyboard.press('Escape');
  await page.waitForURL(new RegExp(`/inbox/${address.replace('.', '\\.')}$`));
  await page.locator('#emails li', { hasText: 'Keyboard two' }).waitFor();

  // Tab from the row link reaches its delete button; Enter deletes only that email
  await page.locator('#emails li a', { hasText: 'Keyboard two' }).focus();
  await page.keyboard.press('Tab');
  assert.match(await page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? ''), /Delete email "Keyboard two"/);
  await page.keyboard.press('Enter');
  await page.locator('#emails li', { hasText: 'Keyboard two' }).waitFor({ state: 'detached' });
  assert.equal(await page.locator('#emails li').count(), 2);

  // Empty inbox asks for a second press
  await page.locator('#empty').focus();
  await page.keyboard.press('Enter');
  assert.match(await page.locator('#empty').innerText(), /Delete all 2\? Click again/);
  assert.equal(await page.locator('#emails li').count(), 2);
  await page.keyboard.press('Enter');
  await page.locator('#empty-state').waitFor({ state: 'visible' });
  assert.equal(await page.locator('#emails li').count(), 0);
  const list = await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json();
  assert.equal(list.data.length, 0);
});

test('copy address puts the address on the clipboard', async () => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.http });
  await page.click('#copy');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), address);
  await page.locator('#toast', { hasText: 'Address copied' }).waitFor();
});

test('a verification email shows its code and main action at the top; Copy puts the code on the clipboard', async () => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.http });
  await svc.send({
    to: address, subject: 'Your verification code',
    text: 'Your verification code is 559 120.',
    html: '<p>Your verification code is <b>559 120</b>.</p><p><a href="https://app.example/verify?t=1">Verify email</a></p>',
  });
  const [summary] = (await (await svc.api(`/api/v1/inboxes/${address}/emails?subject=verification`)).json()).data;
  await page.goto(`${svc.http}/inbox/${address}/${summary.id}`);
  const code = page.locator('.extracted .code.best');
  assert.equal(await code.innerText(), '559120');
  assert.equal(await page.locator('.extracted .action-link a').getAttribute('href'), 'https://app.example/verify?t=1');
  const box = await page.locator('.extracted').boundingBox();
  const frame = await page.locator('#body-frame').boundingBox();
  assert.ok(box && frame && box.y < frame.y, 'above the email body');
  await page.click('.copy-code');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), '559120');
  await page.locator('#toast', { hasText: 'Code copied' }).waitFor();
  await screenshots(page, 'email-code');
  await page.goto(`${svc.http}/inbox/${address}`);
});

test('the list: display names (address on hover), unread until opened, search narrows it, j/k and Enter move and open', async () => {
  const box = `list${Date.now()}@ephemail.test`;
  await svc.send({ from: '"Alice Example" <alice@example.org>', to: box, subject: 'Quarterly report', text: 'numbers' });
  await svc.send({ from: 'bob@example.net', to: box, subject: 'Lunch on Friday?', text: 'pizza' });
  await page.goto(`${svc.http}/inbox/${box}`);
  const rows = page.locator('#emails li');
  await page.waitForFunction(() => document.querySelectorAll('#emails li').length === 2);
  const alice = rows.filter({ hasText: 'Quarterly report' });
  assert.equal(await alice.locator('.from').innerText(), 'Alice Example');
  assert.equal(await alice.locator('.from').getAttribute('title'), 'Alice Example <alice@example.org>', 'the From header as sent, on hover');
  assert.equal(await rows.filter({ hasText: 'Lunch' }).locator('.from').innerText(), 'bob@example.net');
  assert.equal(await page.locator('#emails li.unread').count(), 2, 'both unread');

  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'search');
  await page.keyboard.type('alice');
  assert.equal(await page.locator('#emails li:not([hidden])').count(), 1, 'search narrows the list');
  assert.match(await page.locator('#count').innerText(), /2 emails \(1 shown\)/);
  await page.fill('#search', 'LUNCH');
  assert.deepEqual(await page.locator('#emails li:not([hidden]) .subject').allInnerTexts(), ['Lunch on Friday?']);
  await page.fill('#search', '');
  assert.equal(await page.locator('#emails li:not([hidden])').count(), 2);

  await page.locator('h1#address').click();
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  const focused = await page.evaluate(() => document.activeElement?.closest('li')?.textContent ?? '');
  assert.match(focused, /Quarterly report/, 'j moves down to the second (older) row');
  await page.keyboard.press('k');
  assert.match(await page.evaluate(() => document.activeElement?.closest('li')?.textContent ?? ''), /Lunch/);
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/inbox\/.+\/[0-9a-f-]{36}$/);
  await page.goto(`${svc.http}/inbox/${box}`);
  await page.waitForFunction(() => document.querySelectorAll('#emails li').length === 2);
  assert.equal(await page.locator('#emails li.unread').count(), 1, 'the opened one is read now');
  assert.equal(await rows.filter({ hasText: 'Lunch' }).evaluate((li) => li.classList.contains('unread')), false);
  await screenshots(page, 'inbox-search');
});

test('the headers tab shows encoded words decoded, with a toggle to the raw values', async () => {
  const box = `hdr${Date.now()}@ephemail.test`;
  await svc.send({ from: 'Jürgen Müller <j@example.de>', to: box, subject: 'Grüße aus Köln', text: 'x' });
  const [e] = (await (await svc.api(`/api/v1/inboxes/${box}/emails`)).json()).data;
  await page.goto(`${svc.http}/inbox/${box}/${e.id}`);
  await page.click('#tab-headers');
  const subjectRow = page.locator('#panel-headers tr', { hasText: 'Subject' });
  assert.equal(await subjectRow.locator('.hv-decoded').innerText(), 'Grüße aus Köln');
  assert.equal(await subjectRow.locator('.hv-raw').isHidden(), true);
  await page.click('#headers-raw');
  assert.match(await subjectRow.locator('.hv-raw').innerText(), /=\?UTF-8\?/i);
  assert.equal(await subjectRow.locator('.hv-decoded').isHidden(), true);
  assert.equal(await page.locator('#headers-raw').getAttribute('aria-pressed'), 'true');
});

test('the email\'s details name its body\'s language (the registry\'s `language` view): French, English, none for a short one', async () => {
  const box = `lang${Date.now()}@ephemail.test`;
  const mails = [
    { subject: 'Votre commande', text: 'Bonjour Dana,\n\nnous avons bien reçu votre commande et nous vous remercions de votre confiance. Elle sera expédiée demain matin et vous recevrez un message dès son départ de notre entrepôt.\n\nCordialement,\nL\'équipe' },
    { subject: 'Your order', text: 'Hello Dana,\n\nwe have received your order and thank you for your trust. It will be shipped tomorrow morning and you will get a message as soon as it leaves our warehouse.\n\nKind regards,\nThe team' },
    { subject: 'Short', text: 'ok, thanks' },
  ];
  for (const m of mails) await svc.send({ to: box, ...m });
  const list = (await (await svc.api(`/api/v1/inboxes/${box}/emails`)).json()).data as { id: string; subject: string }[];
  const shown: Record<string, { row: string | null; summary: string; lang: string | null }> = {};
  for (const m of mails) {
    const { id } = list.find((e) => e.subject === m.subject)!;
    await page.goto(`${svc.http}/inbox/${box}/${id}`);
    const row = page.locator('#meta-more dt', { hasText: /^Language$/ });
    shown[m.subject] = {
      row: (await row.count()) ? await row.locator('xpath=following-sibling::dd[1]').innerText() : null,
      summary: await page.locator('#meta-more summary').innerText(),
      lang: await page.locator('#panel-text pre').getAttribute('lang'),
    };
  }
  assert.deepEqual(shown, {
    'Votre commande': { row: 'French (fr)', summary: 'Details (to, authentication, language, times)', lang: 'fr' },
    'Your order': { row: 'English (en)', summary: 'Details (to, authentication, language, times)', lang: 'en' },
    Short: { row: null, summary: 'Details (to, authentication, times)', lang: null },
  });
});

test('dark mode and phone width render every page', async () => {
  await page.emulateMedia({ colorScheme: 'dark' });
  await svc.send({ to: address, from: 'Carol <carol@example.com>', subject: 'Dark mode check', text: 'd' });
  await page.goto(`${svc.http}/inbox/${address}`);
  await page.locator('#emails li').first().waitFor();
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(17, 19, 24)');
  await screenshots(page, 'inbox-dark');
  await page.setViewportSize({ width: 360, height: 740 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at phone width (overflow ${overflow}px)`);
  await page.setViewportSize(DESKTOP);
  await page.emulateMedia({ colorScheme: 'light' });
});

test('each page weighs well under 150 KB of script (a handful of ES modules) and the page logged no errors', async () => {
  for (const path of ['/', `/inbox/${address}`]) {
    const scripts: number[] = [];
    const onResponse = async (r: import('playwright-core').Response) => {
      if (r.request().resourceType() !== 'script') return;
      assert.match(new URL(r.url()).pathname, /^\/web\/assets\/[a-z]+\.[0-9a-f]{10}\.js$/, 'our own content-hashed modules only');
      scripts.push((await r.body()).length);
    };
    const p = await context.newPage();
    p.on('response', onResponse);
    await p.goto(`${svc.http}${path}`, { waitUntil: 'load' });
    await p.waitForTimeout(200); // quiet window: a second script (a lazy chunk) would load in these 200 ms
    const total = scripts.reduce((a, b) => a + b, 0);
    assert.ok(scripts.length >= 1 && scripts.length <= 6 && total < 150 * 1024, `${path}: ${scripts.length} modules, ${total} bytes`);
    await p.close();
  }
  assert.deepEqual(consoleErrors.filter((e) => !/Failed to load resource: the server responded with a status of 404/.test(e)), []);
});
