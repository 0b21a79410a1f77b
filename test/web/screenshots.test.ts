// The README's and docs/web.md's pictures of the inbox and of an email, at 1280 px and 390 px (and
// of a verification email at 1280 px), made
// here from fixed data so that they cannot drift from the pages (docs/web.md "Screenshots"): three
// fixed mails sent over SMTP to a started service whose clock stands still at fixed times, seen by a
// Chromium whose clock is fixed too, so every relative time and countdown reads the same on every run.
// Each picture is compared loosely with the committed one (docs/screenshots/page-*.png): a change
// to the pages that shows fails here until the pictures are made again with
// EPHEMAIL_UPDATE_SCREENSHOTS=1 npm test -- test/web/screenshots.test.ts (which writes them).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { DESKTOP, PHONE, launchChromium } from './browser.ts';

const DOCS = resolve(import.meta.dirname, '../../docs/screenshots');
const OUT = resolve(import.meta.dirname, '../../test-output/screenshots');
const WRITE = process.env.EPHEMAIL_UPDATE_SCREENSHOTS === '1';
/** Share of pixels that may differ (by more than 24 of 255 in a channel) from the committed picture. */
const TOLERANCE = 0.005;

/** "Now" in every picture; the mails arrived 26, 9 and 2 minutes before it. */
const NOW = Date.parse('2026-05-04T09:41:00.000Z');
const BOX = 'demo@ephemail.test';

let svc: TestService;
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** The service's clock: stands still at `at`, which the test sets before each mail. */
const clock = { at: NOW, now() { return this.at; } };

// a 48 × 48 PNG: a blue rounded tile with a white L (fixed bytes)
const LOGO = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAADAAAAAwCAYAAABXAvmHAAAAe0lEQVR42u3awQmAQAwEQIuxJzu3nfhREB8nipDLOYH973yTTBExtTIva2Tmrl+XpZ9gShRvQcqVvyLGAFQrf0YApAOqlj8CAJAFaA0AAAAAAAAAAAAAAABAFuDtAAAAAPwIYLUIsANcaAA+ALgT9wAo/2owxLNHxXebDYgh1+OIS52rAAAAAElFTkSuQmCC',
  'base64',
);

before(async () => {
  svc = await startService({}, { clock });
  const send = async (minutesAgo: number, mail: Parameters<TestService['send']>[0]) => {
    clock.at = NOW - minutesAgo * 60_000;
    await svc.send({ to: BOX, ...mail });
  };
  await send(26, {
    from: 'Acme Newsletter <news@acme.example>',
    subject: 'Spring sale: everything you ordered last year is now 30% off, today only',
    text: 'Spring sale: 30% off everything you ordered last year, today only.',
    html: '<img src="https://cdn.acme.invalid/hero.png" alt="Spring sale" width="600" height="200"><h1>Spring sale</h1><p>30% off everything you ordered last year, today only.</p>',
  });
  await send(9, {
    from: 'Ledger Billing <billing@ledger.example>',
    subject: 'Invoice INV-2041 for April',
    text: 'Hello Dana,\n\nyour invoice INV-2041 for April is attached: 42.00 EUR, paid by card on 2 May.\n\nThank you,\nLedger',
    html: `<div style="font-family:Arial,sans-serif;max-width:560px">
<p><img src="cid:logo.png" alt="Ledger" width="48" height="48"></p>
<h2 style="margin:0 0 8px">Invoice INV-2041</h2>
<p>Hello Dana,</p><p>your invoice for April is attached: <b>42.00 EUR</b>, paid by card on 2 May.</p>
<table style="border-collapse:collapse;width:100%;font-size:14px"><tr><td style="padding:6px 0;border-bottom:1px solid #ddd">Team plan, April</td><td style="text-align:right;border-bottom:1px solid #ddd">35.29 EUR</td></tr>
<tr><td style="padding:6px 0;border-bottom:1px solid #ddd">VAT 19%</td><td style="text-align:right;border-bottom:1px solid #ddd">6.71 EUR</td></tr>
<tr><td style="padding:6px 0"><b>Total</b></td><td style="text-align:right"><b>42.00 EUR</b></td></tr></table>
<p>Thank you,<br>Ledger</p></div>`,
    attachments: [
      { filename: 'logo.png', content: LOGO, contentType: 'image/png', cid: 'logo.png' },
      { filename: 'INV-2041.pdf', content: '%PDF-1.4\n% fixed bytes for the screenshot\n', contentType: 'application/pdf' },
    ],
  });
  await send(2, {
    from: 'Acme <no-reply@acme.example>',
    subject: 'Your Acme verification code',
    text: 'Your verification code is 482913. It expires in 10 minutes.',
    html: '<p>Your verification code is <b>482913</b>. It expires in 10 minutes.</p><p><a href="https://app.acme.example/verify?t=demo">Verify your email</a></p>',
  });
  clock.at = NOW;
  // the page shows what the service has checked by the time it loads: wait for every verdict
  const list = (await (await svc.api(`/api/v1/inboxes/${BOX}/emails`)).json()).data as { id: string }[];
  for (const { id } of list) {
    await until(async () => {
      const e = (await (await svc.api(`/api/v1/emails/${id}`)).json()).data;
      return e.authentication !== null && e.html_check !== null;
    }, 'the checks are done', 10_000, 50);
  }

  browser = await launchChromium();
  context = await browser.newContext({ viewport: DESKTOP, colorScheme: 'light', reducedMotion: 'reduce' });
  page = await context.newPage();
  await page.clock.setFixedTime(NOW);
  // the inbox reads the server's time from the list's Date header (real time): make it NOW too
  await page.route(/\/api\/v1\/inboxes\/[^/]+\/emails\?limit=100$/, async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, headers: { ...response.headers(), date: new Date(NOW - 500).toUTCString() } });
  });
  mkdirSync(OUT, { recursive: true });
});
after(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close().catch(() => undefined);
  await svc?.stop();
});

/**
 * The share of pixels of two PNGs that differ by more than 24 in a channel, 1 when their sizes
 * differ: decoded by Chromium in a blank page. (Page source as text: tsx would wrap the nested
 * functions of a compiled callback in a helper the page does not have.)
 */
const DIFF_IN_PAGE = `async ([x, y]) => {
  const pixels = [];
  for (const b64 of [x, y]) {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    pixels.push(ctx.getImageData(0, 0, c.width, c.height));
  }
  const [i, j] = pixels;
  if (i.width !== j.width || i.height !== j.height) return 1;
  let differ = 0;
  for (let k = 0; k < i.data.length; k += 4) {
    if (Math.max(Math.abs(i.data[k] - j.data[k]), Math.abs(i.data[k + 1] - j.data[k + 1]), Math.abs(i.data[k + 2] - j.data[k + 2])) > 24) differ++;
  }
  return differ / (i.width * i.height);
}`;

async function difference(a: Buffer, b: Buffer): Promise<number> {
  const p = await context.newPage();
  try {
    const fn = await p.evaluateHandle(`(${DIFF_IN_PAGE})`);
    return (await fn.evaluate((f: any, args: string[]) => f(args), [a.toString('base64'), b.toString('base64')])) as number;
  } finally {
    await p.close();
  }
}

/**
 * The whole page at each width, loaded at that width (`show` opens it and waits until it
 * is complete): written to docs/ when updating, else compared with the committed picture.
 */
async function pictures(name: string, show: () => Promise<void>, widths: readonly ('1280' | '390')[] = ['1280', '390']): Promise<void> {
  for (const [label, size] of ([['1280', DESKTOP], ['390', PHONE]] as const).filter(([l]) => widths.includes(l))) {
    await page.setViewportSize(size);
    await show();
    const shot = await page.screenshot({ fullPage: true, animations: 'disabled', caret: 'hide' });
    const file = `page-${name}-${label}.png`;
    writeFileSync(join(OUT, file), shot);
    const committed = join(DOCS, file);
    if (WRITE) {
      writeFileSync(committed, shot);
      continue;
    }
    assert.ok(existsSync(committed), `${committed} is missing: make it with EPHEMAIL_UPDATE_SCREENSHOTS=1 npm test -- test/web/screenshots.test.ts`);
    const share = await difference(shot, readFileSync(committed));
    assert.ok(share <= TOLERANCE, `docs/screenshots/${file} no longer shows the page (${(share * 100).toFixed(2)}% of pixels differ; this run's picture is test-output/screenshots/${file}): if the change is meant, make the pictures again with EPHEMAIL_UPDATE_SCREENSHOTS=1 npm test -- test/web/screenshots.test.ts`);
  }
}

test('the inbox, at 1280 and 390 px', async () => {
  await pictures('inbox', async () => {
    await page.goto(`${svc.http}/inbox/${BOX}`);
    await page.locator('#status-text', { hasText: 'Live' }).waitFor();
    // every row with its preview line, and times read off the fixed clock
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('#emails li')];
      return rows.length === 3 && rows.every((li) => !li.querySelector<HTMLElement>('.row-extra')!.hidden);
    });
    assert.deepEqual(await page.locator('#emails .when').allInnerTexts(), ['2 min ago', '9 min ago', '26 min ago']);
    assert.deepEqual(await page.locator('#emails .ttl').allInnerTexts(), ['deleted in 58:00', 'deleted in 51:00', 'deleted in 34:00']);
  });
});

test('an email, at 1280 and 390 px', async () => {
  const list = (await (await svc.api(`/api/v1/inboxes/${BOX}/emails?subject=INV-2041`)).json()).data as { id: string }[];
  await pictures('email', async () => {
    await page.goto(`${svc.http}/inbox/${BOX}/${list[0].id}`);
    // the frame fitted to its mail, its inline logo and the thumbnails loaded
    await page.waitForFunction(() => {
      const f = document.querySelector<HTMLIFrameElement>('#body-frame');
      const img = f?.contentDocument?.querySelector('img');
      const thumbs = [...document.querySelectorAll<HTMLImageElement>('img.thumb')];
      return !!img && img.complete && img.naturalWidth > 0 && f!.style.height !== '' && thumbs.length === 1 && thumbs.every((t) => t.complete && t.naturalWidth > 0);
    });
    await page.waitForTimeout(150); // unobservable: the frame refits on resize, and nothing says when it is done
    assert.equal(await page.locator('time[data-rel]').textContent(), '9 min ago');
  });
});

test('a verification email with its code, at 1280 px', async () => {
  const list = (await (await svc.api(`/api/v1/inboxes/${BOX}/emails?subject=verification`)).json()).data as { id: string }[];
  await pictures('code', async () => {
    await page.goto(`${svc.http}/inbox/${BOX}/${list[0].id}`);
    await page.waitForFunction(() => {
      const f = document.querySelector<HTMLIFrameElement>('#body-frame');
      return !!f && f.contentDocument?.readyState === 'complete' && f.style.height !== '';
    });
    await page.waitForTimeout(150); // unobservable: the frame refits on resize, and nothing says when it is done
    assert.equal(await page.locator('.extracted .code.best').innerText(), '482913');
  }, ['1280']);
});
