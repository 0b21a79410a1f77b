// The inbox and the email on a 390 × 844 phone in real Chromium (issue 37), asserting what a person
// sees: the page never scrolls sideways; the search field shows its whole placeholder; the count and
// "Empty inbox" stay on one line; a cut subject keeps its attachment marker in sight; the delete
// column is a touch target, not a fifth of the row; in an email the details start collapsed and the
// body's first line is on the first screen; every tab is in sight; a wide mail is scaled with a margin
// on both sides (not cut at its right edge); the Checks tab shows `code` as code, never backticks; an
// image attachment shows as a thumbnail under the page's strict CSP; a blocked remote hero image
// leaves no tall blank box.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Frame, Page } from 'playwright-core';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { PHONE, launchChromium } from './browser.ts';

let svc: TestService;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const errors: string[] = [];

const BOX = 'phone@ephemail.test';
const SUBJECT = 'Spring sale: everything you ordered last year is now 30% off, today only';
/** A 24 × 24 PNG (a blue square), so a thumbnail that loaded has a natural width. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAABgAAAAYCAIAAABvFaqvAAAAIUlEQVR4nGNkaPjPQA3ARBVTRg0aNWjUoFGDRg0aNWhQGQQAk5kBj7fnR+cAAAAASUVORK5CYII=',
  'base64',
);
const SALE_HTML = `<style>@font-face{font-family:Brand;src:url(https://fonts.acme.invalid/brand.woff2)} h1{font-family:Brand,sans-serif}</style>
<img src="https://cdn.acme.invalid/hero.png" alt="Spring sale" style="display:block;width:600px;height:200px">
<h1 id="first-line">Spring sale</h1><p>Everything is 30% off today. ${'Lorem ipsum dolor sit amet. '.repeat(8)}</p>`;
const WIDE_HTML = `<div id="wide" style="width:600px;border:4px solid #c00"><p>A 600 px wide mail.</p><p id="edge" style="text-align:right;margin:0">right edge</p></div>`;

let saleId = '';

before(async () => {
  svc = await startService();
  browser = await launchChromium();
  context = await browser.newContext({ viewport: PHONE });
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  await svc.send({ to: BOX, from: 'Acme Newsletter <news@acme.example>', subject: 'Wide mail', text: 'wide', html: WIDE_HTML });
  await svc.send({
    to: BOX, from: 'Acme Newsletter <news@acme.example>', subject: SUBJECT, text: 'Everything is 30% off today.', html: SALE_HTML,
    attachments: [
      { filename: 'photo.png', content: PNG, contentType: 'image/png' },
      { filename: 'terms.pdf', content: '%PDF-1.4\n', contentType: 'application/pdf' },
    ],
  });
  const list = (await (await svc.api(`/api/v1/inboxes/${BOX}/emails`)).json()).data;
  saleId = list.find((e: { subject: string }) => e.subject === SUBJECT).id;
  // the page shows the checks the service has made by the time it is loaded: wait for them
  await until(async () => (await (await svc.api(`/api/v1/emails/${saleId}`)).json()).data.html_check !== null, 'the HTML check is done', 10_000, 50);
});
after(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close().catch(() => undefined);
  await svc?.stop();
});

const horizontalOverflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

/** How many line boxes the text of `selector` takes (1: not wrapped). */
const lines = (selector: string) => page.evaluate((sel) => {
  const range = document.createRange();
  range.selectNodeContents(document.querySelector(sel)!);
  return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
}, selector);

async function openEmail(subject: string): Promise<Frame> {
  await page.goto(`${svc.http}/inbox/${BOX}`);
  await page.locator('#emails li', { hasText: subject }).locator('a').click();
  await page.waitForURL(/\/inbox\/.+\/[0-9a-f-]{36}$/);
  await page.waitForFunction(() => {
    const f = document.querySelector<HTMLIFrameElement>('#body-frame');
    return !!f && f.contentDocument?.readyState === 'complete' && f.style.height !== '';
  });
  return page.frames().find((f) => f.url().includes('/web/frames/'))!;
}

test('the inbox at 390 px: no sideways scroll, whole placeholder, one-line count and button, attachment marker in sight, a narrow delete column', async () => {
  await page.goto(`${svc.http}/inbox/${BOX}`);
  await page.waitForFunction(() => document.querySelectorAll('#emails li').length === 2);
  assert.equal(await horizontalOverflow(), 0, 'the page does not scroll sideways');

  const placeholder = await page.evaluate(() => {
    const input = document.querySelector<HTMLInputElement>('#search')!;
    const s = getComputedStyle(input);
    const ctx = document.createElement('canvas').getContext('2d')!;
    ctx.font = s.font;
    return { text: ctx.measureText(input.placeholder).width, room: input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) };
  });
  assert.ok(placeholder.text <= placeholder.room, `the search placeholder fits (${placeholder.text} px of text in ${placeholder.room} px)`);
  assert.equal(await lines('#count'), 1, 'the count is on one line');
  assert.equal(await lines('#empty'), 1, '"Empty inbox" is on one line');

  const row = page.locator('#emails li', { hasText: 'Spring sale' });
  const cut = await row.locator('.subject').evaluate((s) => s.scrollWidth > s.clientWidth);
  assert.ok(cut, 'the long subject is cut at this width (the case under test)');
  const subject = (await row.locator('.subject').boundingBox())!;
  const clip = row.locator('.clip');
  assert.equal(await clip.isVisible(), true, 'the attachment marker shows');
  const clipBox = (await clip.boundingBox())!;
  const link = (await row.locator('.row-link').boundingBox())!;
  assert.ok(clipBox.x >= subject.x + subject.width - 0.5, 'the marker is beside the cut subject, not under its ellipsis');
  assert.ok(clipBox.x + clipBox.width <= link.x + link.width + 0.5, 'and inside the row');
  assert.equal(await clip.getAttribute('title'), 'Has attachments');

  const del = (await row.locator('button.del').boundingBox())!;
  const whole = (await row.boundingBox())!;
  assert.ok(del.width <= whole.width * 0.15, `the delete column is narrow (${del.width} of ${whole.width} px)`);
  assert.ok(del.width >= 40, `and still a touch target (${del.width} px)`);
  assert.match((await row.locator('button.del').getAttribute('aria-label')) ?? '', /^Delete email "Spring sale/);
});

test('an email at 390 px: details collapsed, the body on the first screen, every tab in sight, a thumbnail, no blank hero box', async () => {
  const frame = await openEmail('Spring sale');
  assert.equal(await horizontalOverflow(), 0, 'the page does not scroll sideways');

  // the details under From start collapsed on a phone, and open with a tap
  const to = page.locator('#meta-more dd', { hasText: BOX });
  assert.equal(await to.isVisible(), false, 'To is folded away');
  assert.equal(await page.locator('#meta dd', { hasText: 'news@acme.example' }).first().isVisible(), true, 'From stays in sight');

  const frameBox = (await page.locator('#body-frame').boundingBox())!;
  const first = (await frame.locator('#first-line').boundingBox())!;
  assert.ok(first.y + first.height <= PHONE.height, `the body's first line is on the first screen (its bottom at ${first.y + first.height} px of ${PHONE.height})`);
  // the hero image is blocked (remote): it keeps a line for its alt text, not its 200 px box
  assert.ok(first.y - frameBox.y < 90, `no tall blank box before the text (${first.y - frameBox.y} px from the frame's top)`);

  const tabs = page.getByRole('tab');
  assert.deepEqual((await tabs.allInnerTexts()).map((t) => t.replace(/\s+/g, ' ')), ['HTML', 'Plain text', 'Headers (' + (await page.locator('#panel-headers tr').count()) + ')', 'Links (0)', 'Checks', 'Source']);
  for (const tab of await tabs.all()) {
    const b = (await tab.boundingBox())!;
    assert.ok(b.x >= 0 && b.x + b.width <= PHONE.width, `tab "${await tab.innerText()}" is wholly in sight (${b.x}..${b.x + b.width})`);
    assert.equal(await tab.evaluate((t) => t.scrollWidth <= t.clientWidth), true, `tab "${await tab.innerText()}" is not cut`);
  }
  assert.equal(await page.locator('.tabs').evaluate((t) => t.scrollWidth <= t.clientWidth), true, 'nothing hidden in a scrolled tab bar');

  // an image attachment shows as a thumbnail from the email's own image route, under the page's CSP
  const thumb = page.locator('.attachments li', { hasText: 'photo.png' }).locator('img.thumb');
  await thumb.scrollIntoViewIfNeeded();
  await until(async () => (await thumb.evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth)) === 24, 'the thumbnail loaded', 5000, 50);
  assert.match((await thumb.getAttribute('src')) ?? '', new RegExp(`^/web/frames/${saleId}/cid/`));
  assert.equal(await page.locator('.attachments li', { hasText: 'terms.pdf' }).locator('img').count(), 0, 'no thumbnail for a PDF');

  await page.locator('#meta-more summary').click();
  assert.equal(await to.isVisible(), true, 'a tap opens the details');
  assert.deepEqual(errors, []);
});

test('the email page\'s CSP allows images only from its own image route (and data:)', async () => {
  const res = await svc.api(`/inbox/${BOX}/${saleId}`);
  const csp = res.headers.get('content-security-policy') ?? '';
  assert.match(csp, new RegExp(`; img-src ${svc.http.replace(/[.]/g, '\\.')}/web/frames/${saleId}/cid/ data:; `));
  const inbox = await svc.api(`/inbox/${BOX}`);
  assert.match(inbox.headers.get('content-security-policy') ?? '', /; img-src data:; /, 'other pages: no image from anywhere but data:');
});

test('the Checks tab renders `code` spans as code, without backticks', async () => {
  await openEmail('Spring sale');
  await page.getByRole('tab', { name: 'Checks' }).click();
  const panel = page.locator('#panel-checks');
  await panel.waitFor();
  const text = await panel.innerText();
  assert.match(text, /Outlook Windows: partly supported \(.*display:none/, 'the caniemail note is there');
  assert.ok(!text.includes('`'), 'no raw backtick');
  assert.ok((await panel.locator('code', { hasText: /^display:none$/ }).count()) > 0, 'display:none shown as code');
  // a code span holding markup is text: `<img>` is shown, never made an element
  assert.ok((await panel.locator('code', { hasText: /^<img>$/ }).count()) > 0, '<img> shown as code');
  assert.equal(await panel.locator('img').count(), 0, 'escaped: no element made from a note');
  assert.equal(await horizontalOverflow(), 0);
});

test('a 600 px mail on a 390 px phone is scaled with a margin on both sides: its right edge is not cut', async () => {
  const frame = await openEmail('Wide mail');
  const frameBox = (await page.locator('#body-frame').boundingBox())!;
  const wide = (await frame.locator('#wide').boundingBox())!;
  const left = wide.x - frameBox.x;
  const right = frameBox.x + frameBox.width - (wide.x + wide.width);
  assert.ok(right >= 4, `a margin at the right edge (${right} px)`);
  assert.ok(Math.abs(left - right) <= 2, `as wide as the left one (${left} vs ${right} px)`);
  const edge = (await frame.locator('#edge').boundingBox())!;
  assert.ok(edge.x + edge.width <= frameBox.x + frameBox.width - 4, 'the right-aligned text is inside the frame');
  assert.equal(await frame.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth), true, 'the frame does not scroll sideways');
  assert.equal(await horizontalOverflow(), 0);
});
