// HTML compatibility (issue 25 item 3, docs/sender-checks.md): what `html_check` of the full email
// says about a crafted newsletter and a plain-text mail, over real SMTP and HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkHtml } from '../../src/domain/html-check-run.ts';
import { HTML_CHECK_MAX_CHARS } from '../../src/domain/html-check.ts';
import type { HtmlCheck } from '../../src/domain/html-check.ts';
import { BudgetExceededError, createLane, HeldLostError } from '../../src/derive/pool.ts';
import { deriveViews } from '../../src/derive/views.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { cpuMs } from '../helpers/time.ts';

const NEWSLETTER = `<!doctype html>
<html><head>
<style>
  .row { display: flex; justify-content: space-between; gap: 12px; }
  @media (max-width: 600px) { .row { display: block; } }
</style>
</head>
<body>
  <div class="row" style="display:flex">
    <p>This week's news</p><p><a href="https://news.example/read">Read more</a></p>
  </div>
</body></html>`;

interface WireCheck {
  supported_percent: number; partial_percent: number; unsupported_percent: number;
  features: { feature: string; url: string | null; clients: { client: string; name: string; support: 'none' | 'partial'; notes: string[] }[] }[];
  clients_checked: string[]; truncated: boolean; error: string | null;
}

describe('html_check', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService();
  });
  after(() => svc.stop());

  const full = async (address: string) => {
    const res = await svc.api(`/api/v1/inboxes/${address}/latest`);
    assert.equal(res.status, 200);
    const { data: email } = (await res.json()) as { data: { id: string; html_check: WireCheck | null } };
    const { data: again } = (await (await svc.api(`/api/v1/emails/${email.id}`)).json()) as { data: { html_check: WireCheck | null } };
    assert.deepEqual(again.html_check, email.html_check, 'GET /emails/{id} and latest agree');
    return email.html_check;
  };

  test('a newsletter with <style> in its head and flexbox: both findings, with the clients that lack them', async () => {
    const to = 'newsletter@ephemail.test';
    await svc.send({ to, subject: 'News', text: 'This week', html: NEWSLETTER });
    const check = await full(to);
    assert.ok(check, 'an HTML part gets a check');
    assert.equal(check.error, null);
    assert.equal(check.truncated, false);
    const byName = new Map(check.features.map((f) => [f.feature, f]));
    const style = byName.get('<style> element');
    assert.ok(style, `<style> is found (got ${[...byName.keys()].join(', ')})`);
    assert.match(style.url ?? '', /^https:\/\/www\.caniemail\.com\/features\//);
    assert.ok(style.clients.some((c) => c.client.startsWith('gmail.')), 'Gmail has limits on <style>');
    const flex = byName.get('display:flex');
    assert.ok(flex, 'display:flex is found');
    const outlook = flex.clients.find((c) => c.client === 'outlook.windows');
    assert.deepEqual(outlook && { name: outlook.name, support: outlook.support }, { name: 'Outlook Windows', support: 'none' });
    assert.ok(byName.has('@media'), 'the media query too');
    assert.ok(check.clients_checked.includes('apple-mail.macos') && check.clients_checked.includes('yahoo.desktop-webmail'));
    const total = check.supported_percent + check.partial_percent + check.unsupported_percent;
    assert.ok(Math.abs(total - 100) < 0.2, `the shares add up to 100 (${total})`);
    assert.ok(check.unsupported_percent > 0 && check.supported_percent > 0 && check.supported_percent < 100);
    // the email page: a Checks tab saying the same in words
    const id = ((await (await svc.api(`/api/v1/inboxes/${to}/latest`)).json()) as { data: { id: string } }).data.id;
    const page = await (await svc.api(`/inbox/${to}/${id}`)).text();
    assert.match(page, /role="tab" id="tab-checks"/);
    assert.match(page, /<h3>HTML compatibility<\/h3><p class="html-support"><strong>[\d.]+%<\/strong> supported/);
    assert.match(page, />display:flex<\/a><\/strong><ul>.*<li>Outlook Windows: not supported/s);
    assert.match(page, />&#60;style&#62; element<\/a>/);
  });

  test('a plain-text mail: null', async () => {
    const to = 'plain@ephemail.test';
    await svc.send({ to, subject: 'Plain', text: 'Just words.' });
    assert.equal(await full(to), null);
    const id = ((await (await svc.api(`/api/v1/inboxes/${to}/latest`)).json()) as { data: { id: string; spam: unknown } }).data;
    assert.equal(id.spam, null, 'no spamd configured: spam is null too');
    const page = await (await svc.api(`/inbox/${to}/${id.id}`)).text();
    assert.doesNotMatch(page, /tab-checks/, 'nothing to check: no Checks tab');
  });

  test('the OpenAPI document describes html_check', async () => {
    const doc = (await (await svc.api('/api/v1/openapi.json')).json()) as { components: { schemas: Record<string, { properties: Record<string, unknown> }> } };
    assert.ok('html_check' in doc.components.schemas.Email.properties);
    assert.ok('supported_percent' in doc.components.schemas.HtmlCheck.properties);
  });
});

describe('html_check bounds', () => {
  test('views derived without their HTML (its budget ran out) say so instead of null; with HTML, the source goes to the check cut past the cap', async () => {
    const raw = new TextEncoder().encode(`From: a@b.test\r\nTo: c@ephemail.test\r\nSubject: x\r\nContent-Type: text/html\r\n\r\n${NEWSLETTER}${'<p>x</p>'.repeat(20_000)}\r\n`);
    const limits = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
    const without = await deriveViews(raw, limits, { html: false });
    assert.equal(without.views.htmlCheck?.error, 'html_over_budget');
    assert.equal(without.inputs.htmlCheck, undefined);
    const withHtml = await deriveViews(raw, limits, { html: true });
    assert.equal(withHtml.inputs.htmlCheck?.length, HTML_CHECK_MAX_CHARS + 1, 'one character past the cap: the check knows it was cut');
    assert.match(withHtml.inputs.htmlCheck ?? '', /<style>/, 'the HTML as sent, not the sanitized one');
  });

  test('HTML past the cap is checked up to the cap and says so; the time stays small', () => {
    const html = `<html><head><style>.a{display:flex}</style></head><body>${'<p class="a">x</p>\n'.repeat(20_000)}</body></html>`;
    assert.ok(html.length > HTML_CHECK_MAX_CHARS);
    const { value: check, ms } = cpuMs(() => checkHtml(html.slice(0, HTML_CHECK_MAX_CHARS), true));
    assert.equal(check.truncated, true);
    assert.ok(check.features.some((f) => f.feature === 'display:flex'));
    // bound: the cut keeps the check's time small (it is the behaviour); CPU time, so other load does not stretch it
    assert.ok(ms < 5000, `within the default budget: ${ms.toFixed(0)} ms of CPU`);
  });

  test('a derivation run with `keep` leaves the HTML on its worker: only the check\'s task crosses, it runs there within its own budget, and other derivations go on meanwhile', { timeout: 120_000 }, async () => {
    const pool = createLane({ workers: 2 });
    const limits = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
    const mail = (html: string) => new TextEncoder().encode(`From: a@b.test\r\nTo: c@ephemail.test\r\nSubject: x\r\nContent-Type: text/html\r\n\r\n${html}\r\n`);
    try {
      pool.warm(2);
      const d = await pool.run('derive', mail(NEWSLETTER), limits, { budgetMs: 30_000, keepRaw: true, keep: true, options: { html: true } });
      assert.deepEqual(d.inputs, {}, 'no input crosses back: the HTML stays on the worker');
      assert.ok(d.held, 'held on its worker');
      assert.deepEqual(Object.keys(d.kept ?? {}).sort(), ['htmlCheck', 'language']);
      assert.equal((d.kept!.htmlCheck.over_budget as HtmlCheck).error, 'over_budget', 'the fallbacks made where the input is');
      const check = await pool.run<'view', HtmlCheck>('view', new Uint8Array(0), limits, { budgetMs: 10_000, on: d.held, options: { view: 'htmlCheck' } });
      assert.deepEqual(check, checkHtml(NEWSLETTER, false), 'the same check as on the HTML sent over');
      assert.equal(await pool.run('view', new Uint8Array(0), limits, { budgetMs: 10_000, on: d.held, options: { view: 'language' } }), null, 'too short to tell');

      // a check that would run long (~300 ms on a 2-core machine): ended at its own budget (30 ms), while another message is derived
      const slow = `<html><body>${'<p style="display:flex;color:red">x</p>'.repeat(3000)}</body></html>`;
      const held = await pool.run('derive', mail(slow), limits, { budgetMs: 30_000, keepRaw: true, keep: true, options: { html: true } });
      assert.ok(held.held);
      const checking = pool.run('view', new Uint8Array(0), limits, { budgetMs: 30, on: held.held, options: { view: 'htmlCheck' } });
      const other = await pool.run('derive', mail('<p>another</p>'), limits, { budgetMs: 30_000, keepRaw: true, options: { html: true } });
      assert.match(String(other.views.htmlBody), /another/, 'another derivation answered on the other worker meanwhile');
      await assert.rejects(checking, BudgetExceededError);
      await assert.rejects(pool.run('view', new Uint8Array(0), limits, { budgetMs: 10_000, on: held.held, options: { view: 'language' } }), HeldLostError, 'its worker ended: what it kept is gone');
    } finally {
      await pool.close();
    }
  });

  test('a check past its budget ends its worker; the caller gets BudgetExceededError, not a hang', async () => {
    const pool = createLane({ workers: 1 });
    try {
      pool.warm();
      const html = new TextEncoder().encode(`<html><body>${'<p style="display:flex;color:red">x</p>'.repeat(3000)}</body></html>`);
      await assert.rejects(pool.run('view', html, { maxAttachmentBytes: 1, maxAttachments: 1 }, { budgetMs: 1, options: { view: 'htmlCheck' } }), { name: 'Error', message: /budget/ });
      const ok = await pool.run<'view', HtmlCheck>('view', new TextEncoder().encode('<p style="display:flex">x</p>'), { maxAttachmentBytes: 1, maxAttachments: 1 }, { budgetMs: 10_000, options: { view: 'htmlCheck' } });
      assert.equal(ok.error, null, 'the next check runs on a fresh worker');
    } finally {
      await pool.close();
    }
  });
});
