// Derived views (services/views.ts): derived once per message in a worker, kept in the store, and
// within a budget: a derivation that runs out of time ends with its fallback, never with a stall.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { createViewService } from '../../src/services/views.ts';
import { watchEventLoop } from '../helpers/loop.ts';
import { summarize, VIEWS_VERSION } from '../../src/smtp/parse.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { inbox, newEmail } from '../conformance/store.suite.ts';

const dir = mkdtempSync(join(tmpdir(), 'ephemail-views-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const log = pino({ level: 'silent' });

const mime = (html: string, extra = '') => Buffer.from([
  'From: "Shop" <news@shop.example>', 'Subject: Weekly', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="M"', '',
  '--M', 'Content-Type: text/html; charset=utf-8', '', html,
  '--M', 'Content-Type: image/png', 'Content-Transfer-Encoding: base64', 'Content-ID: <ii_lx9k2f3a0>', 'Content-Disposition: inline; filename="image.png"', '',
  Buffer.from('PNGDATA').toString('base64'), extra, '--M--', '',
].join('\r\n'));

async function stored(path: string, raw: Buffer) {
  const store = createSqliteStore(path);
  const s = await summarize(new Uint8Array(raw), LIMITS);
  const [row] = await store.addEmails([newEmail(inbox(), { raw: s.raw, hasAttachments: s.hasAttachments })]);
  const key = (await store.getEmail(row.id, Date.now()))!.messageKey;
  return { store, key };
}

test('views are derived once per message, kept in the store, and read back by a new service without deriving', async () => {
  const path = join(dir, 'once.db');
  const { store, key } = await stored(path, mime('<p onclick="x()">Hello <b>there</b></p><img src="cid:ii_lx9k2f3a0">'));
  let derivations = 0;
  const views = createViewService(store, LIMITS, log, { onDerived: () => derivations++ });
  try {
    const [a, b] = await Promise.all([views.get(key), views.get(key)]);
    assert.equal(derivations, 1, 'two readers at once share one derivation');
    assert.deepEqual(a, b);
    assert.equal(a?.version, VIEWS_VERSION);
    assert.equal(a?.outcome, 'ok');
    assert.match(a!.htmlBody!, /Hello <b>there<\/b>/);
    assert.doesNotMatch(a!.htmlBody!, /onclick/, 'sanitized');
    assert.deepEqual(a!.attachments.map((x) => [x.filename, x.contentId, x.sizeBytes]), [['image.png', 'ii_lx9k2f3a0', 7]]);
    assert.equal(a!.agentBody.body, 'Hello there');
    await views.stored(key);
    assert.equal(JSON.parse((await store.getViews(key))!).version, VIEWS_VERSION, 'kept beside the message');
  } finally {
    await views.close();
  }
  const again = createViewService(store, LIMITS, log, { onDerived: () => derivations++ });
  try {
    assert.equal((await again.get(key))?.htmlBody?.includes('Hello'), true);
    assert.equal(derivations, 1, 'a new process reads the kept views');
    await store.putViews(key, JSON.stringify({ version: VIEWS_VERSION - 1 }), []);
    const fresh = createViewService(store, LIMITS, log, { onDerived: () => derivations++ });
    assert.equal((await fresh.get(key))?.version, VIEWS_VERSION, 'views of an older version are derived again from the raw message');
    await fresh.stored(key);
    assert.equal(derivations, 2);
    await fresh.close();
  } finally {
    await again.close();
    await store.close();
  }
});

test('a derivation over its budget ends with a fallback: text kept, html_body null, the event loop never stalls', { timeout: 120_000 }, async () => {
  // about 3 MB of nested markup: the sanitizer needs seconds for it
  const heavy = `<div style="height:0;overflow:hidden">${'<table><tr><td><span>code 123456</span></td></tr></table>'.repeat(50_000)}</div>`;
  const { store, key } = await stored(join(dir, 'budget.db'), mime(heavy));
  let outcome = '';
  const views = createViewService(store, LIMITS, log, { budgetMs: () => 100, onDerived: (_s, o) => (outcome = o) });
  const loop = watchEventLoop(10);
  try {
    const started = performance.now();
    const v = await views.get(key);
    const took = performance.now() - started;
    assert.ok(v, 'a result, not an error');
    assert.notEqual(v.outcome, 'ok');
    assert.equal(outcome, v.outcome);
    assert.equal(v.htmlBody, null, 'no HTML past its budget');
    assert.match(v.textBody ?? '', /code 123456/, 'the words are kept');
    assert.ok(took < 10_000, `answered in ${took.toFixed(0)} ms`);
    assert.ok(loop.worstMs() < 500, `the event loop kept turning (worst gap ${loop.worstMs().toFixed(0)} ms)`);
    await views.stored(key);
    assert.equal(JSON.parse((await store.getViews(key))!).outcome, v.outcome, 'the fallback is kept: not derived again on every read');
  } finally {
    loop.stop();
    await views.close();
    await store.close();
  }
});
