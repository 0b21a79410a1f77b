// Derived views (services/views.ts): derived once per message in a worker, kept in the store, and
// within a budget: a derivation that runs out of time ends with its fallback, never with a stall.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import pino from 'pino';
import { ASK_AGAIN_TIMES, createViewService } from '../../src/services/views.ts';
import { watchEventLoop } from '../helpers/loop.ts';
import type { Lane } from '../../src/derive/pool.ts';
import { VIEWS_VERSION } from '../../src/derive/registry.ts';
import { summarize } from '../../src/derive/summary.ts';
import { minimalViews } from '../../src/derive/views.ts';
import { until } from '../helpers/time.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { inbox, newEmail } from '../conformance/harness.ts';
import { FAKE_REPORT, fakeSpamd } from '../helpers/spamd.ts';
import { freePort } from '../helpers/serve.ts';

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
    // bound: answered, not held by the slow derivation; one-sided, generous
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

test('who derives first: readers before list rows and background work, callers in turn, no caller on every worker', async () => {
  const store = createSqliteStore(join(dir, 'order.db'));
  const keys = new Map<string, string>();
  for (const name of ['A1', 'A2', 'A3', 'A4', 'B1', 'C1', 'D1']) {
    const raw = Buffer.from(`From: s@example.org\r\nSubject: ${name}\r\n\r\nbody of ${name}\r\n`);
    const [row] = await store.addEmails([newEmail(inbox(), { raw, subject: name })]);
    keys.set(name, (await store.getEmail(row.id, Date.now()))!.messageKey);
  }
  // a pool that runs nothing until told: which derivations run, and in which order
  const running = new Map<string, () => void>();
  const order: string[] = [];
  let most = 0;
  const pool: Lane = {
    run: ((_op: string, raw: Uint8Array) => new Promise((resolve) => {
      const name = /Subject: (\w+)/.exec(Buffer.from(raw).toString())![1];
      order.push(name);
      running.set(name, () => {
        running.delete(name);
        resolve(minimalViews(raw) as never);
      });
      most = Math.max(most, running.size);
    })) as Lane['run'],
    warm: () => undefined,
    release: () => undefined,
    close: async () => undefined,
    size: 0,
    max: 2,
  };
  const finish = (name: string) => running.get(name)!();
  const views = createViewService(store, LIMITS, log, { pool });
  const get = (name: string, owner: string, priority: 'read' | 'list') => views.get(keys.get(name)!, { owner, priority });
  try {
    // one caller's list of four: one runs, the rest wait (a list never takes the last worker)
    const list = ['A1', 'A2', 'A3', 'A4'].map((n) => get(n, 'attacker', 'list'));
    await until(() => order.length === 1, 'the first list row derives');
    assert.equal(views.waiting, 3);
    // someone else opens an email: it runs at once, on the worker the list may not take
    const b = get('B1', 'reader', 'read');
    await until(() => order.length === 2, 'the read derives');
    assert.deepEqual(order, ['A1', 'B1']);
    // a second reader, while both workers are busy, goes before the list's next row
    const c = get('C1', 'other', 'read');
    await until(() => views.waiting === 4, 'the second read waits');
    finish('B1');
    await b;
    await until(() => order.length === 3, 'a worker is free');
    assert.deepEqual(order, ['A1', 'B1', 'C1'], 'a read before a list row');
    // one caller never holds both workers: its second read waits for its first
    const d = get('D1', 'other', 'read');
    finish('A1');
    await until(() => order.length === 4, 'the list goes on');
    assert.deepEqual(order.at(-1), 'A2', 'not D1: its caller already holds a worker');
    // a reader asking for a row the list still waits for takes it over: a read now
    const a4 = get('A4', 'someone', 'read');
    finish('C1');
    await c;
    await until(() => order.length === 5, 'the next');
    assert.equal(order.at(-1), 'D1', 'its caller is free again');
    finish('A2');
    await until(() => order.length === 6, 'the next');
    assert.equal(order.at(-1), 'A4', 'the promoted row, before the list\'s A3');
    finish('D1');
    await until(() => order.length === 7, 'the last');
    assert.equal(order.at(-1), 'A3');
    finish('A4');
    finish('A3');
    await Promise.all([...list, d, a4]);
    assert.equal(most, 2, 'never more derivations at once than workers');
  } finally {
    await views.close();
    await store.close();
  }
});

test('a spam score that failed (spamd down) is asked again by a later read, and kept with the parts once spamd answers', async () => {
  const port = await freePort(); // nothing listens there yet
  const spamd = { host: '127.0.0.1', port };
  const { store, key } = await stored(join(dir, 'ask-again.db'), mime('<p>Hello</p><img src="cid:ii_lx9k2f3a0">'));
  const changed: string[] = [];
  const views = createViewService(store, LIMITS, log, { spamd, askAgainMs: 50, onWritten: (k) => changed.push(k) });
  let fake: Awaited<ReturnType<typeof fakeSpamd>> | undefined;
  try {
    const failed = await views.get(key);
    assert.deepEqual(failed?.spam, { error: 'spamd unreachable' });
    assert.equal(failed && views.isFinal(failed), false, 'a failure asked again is not final: no answer made of it is kept');
    fake = await fakeSpamd(FAKE_REPORT, port); // spamd is back, where it was
    await until(async () => {
      const spam = (await views.get(key))?.spam;
      return spam != null && 'score' in spam;
    }, 'a later read asked spamd again', 10_000, 20);
    const read = await views.get(key);
    const peeked = read?.spam;
    assert.equal(peeked && 'score' in peeked ? peeked.score : null, 2.3, 'the kept views read the score');
    assert.equal(read && views.isFinal(read), true, 'a score is final: the read model may keep its answer');
    assert.deepEqual(changed, [key], 'the read model was told the kept views changed (once: their first write changed nothing a reader had)');
    assert.equal(fake.connections, 1);
    // kept in the store, the parts with it: a new service reads the score without asking spamd
    const again = createViewService(store, LIMITS, log, { spamd, askAgainMs: 50 });
    try {
      const kept = await again.get(key);
      assert.equal(kept?.spam && 'score' in kept.spam ? kept.spam.score : null, 2.3);
      assert.equal(fake.connections, 1, 'not asked again: the score was kept');
      const part = await store.readPart(key, 0);
      const bytes: Buffer[] = [];
      for await (const c of part?.chunks ?? []) bytes.push(Buffer.from(c));
      assert.equal(Buffer.concat(bytes).toString(), 'PNGDATA', 'the attachment is kept as it was');
    } finally {
      await again.close();
    }
  } finally {
    fake?.server.close();
    await views.close();
    await store.close();
  }
});

test(`a spam score still failing is asked again ${ASK_AGAIN_TIMES} times at most, waiting twice as long each time`, async () => {
  const fake = await fakeSpamd('SPAMD/1.0 76 Bad header line: x\r\n\r\n'); // answers, with an error
  const asks: number[] = [];
  fake.server.on('connection', () => asks.push(performance.now()));
  const { store, key } = await stored(join(dir, 'ask-again-times.db'), mime('<p>Hello</p>'));
  const askAgainMs = 20;
  const views = createViewService(store, LIMITS, log, { spamd: { host: '127.0.0.1', port: fake.port }, askAgainMs });
  try {
    const first = await views.get(key);
    assert.match(first?.spam && 'error' in first.spam ? first.spam.error : '', /^spamd error: /);
    assert.equal(fake.connections, 1);
    const read = () => views.get(key);
    await until(async () => (await read(), fake.connections === 1 + ASK_AGAIN_TIMES), `asked ${ASK_AGAIN_TIMES} more times`, 20_000, 10);
    // nothing more may happen: twice the longest wait, reading all along
    const end = performance.now() + 2 * askAgainMs * 2 ** ASK_AGAIN_TIMES;
    while (performance.now() < end) {
      await read();
      await new Promise((r) => setTimeout(r, 10)); // quiet window: reads spaced over the time in which no more asks may come
    }
    assert.equal(fake.connections, 1 + ASK_AGAIN_TIMES, 'no more asks');
    // bound: each wait at least twice the one before (lower bounds only: a loaded machine only waits longer;
    // a little slack for the time between a read's decision and its connection)
    for (let i = 1; i < ASK_AGAIN_TIMES; i++) {
      const gap = asks[i + 1] - asks[i];
      assert.ok(gap >= askAgainMs * 2 ** i * 0.8 - 5, `ask ${i + 1} came ${gap.toFixed(0)} ms after ask ${i}`);
    }
  } finally {
    fake.server.close();
    await views.close();
    await store.close();
  }
});

test('a hung spamd holds no derivation slot (four first reads ask it at once), and after two failures it is not asked for a while: a read gets the failure at once, to be asked again later', async () => {
  // a spamd that accepts and never answers
  const sockets = new Set<import('node:net').Socket>();
  let connections = 0;
  const hung = createServer((s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => hung.listen(0, '127.0.0.1', () => r()));
  const spamd = { host: '127.0.0.1', port: (hung.address() as AddressInfo).port };
  const store = createSqliteStore(join(dir, 'hung-spamd.db'));
  const keys: string[] = [];
  for (let i = 0; i < 5; i++) {
    const s = await summarize(new Uint8Array(mime(`<p>Hello ${i}</p>`)), LIMITS);
    const [row] = await store.addEmails([newEmail(inbox(), { raw: s.raw, hasAttachments: s.hasAttachments })]);
    keys.push((await store.getEmail(row.id, Date.now()))!.messageKey);
  }
  const views = createViewService(store, LIMITS, log, { spamd, budgets: { spam: 2000 }, breakerMs: 60_000 });
  try {
    let answered = 0;
    const reads = keys.slice(0, 4).map((k) => views.get(k).finally(() => answered++));
    // two derivation slots: four reads ask spamd together only when none waits for it in a slot
    await until(() => connections === 4 || answered > 0, 'four first reads ask spamd, or one is answered', 10_000, 10);
    assert.equal(answered, 0, 'all four asked spamd before any read was answered');
    assert.equal(connections, 4);
    const got = await Promise.all(reads);
    for (const v of got) assert.ok(v?.spam && 'error' in v.spam, 'each read gets the failure (asked again later)');
    // the breaker is open: the fifth message's first read does not ask spamd
    const fifth = await views.get(keys[4]);
    assert.ok(fifth?.spam && 'error' in fifth.spam);
    assert.equal(fifth && views.isFinal(fifth), false, 'a failure to be asked again later');
    assert.equal(connections, 4, 'spamd not asked while the breaker is open');
  } finally {
    for (const s of sockets) s.destroy();
    hung.close();
    await views.close();
    await store.close();
  }
});

test('the HTML check runs on the worker that parsed the message, within its own budget: past it the check reads over_budget, and the views with a shorter budget were derived first', { timeout: 120_000 }, async () => {
  const words = 'The weekly newsletter brings you the latest news about our shop, the new products we have in store and the offers of this week for all our customers. ';
  const html = `<html><head><style>.row{display:flex}</style></head><body><div class="row" style="display:flex"><p>${words.repeat(4)}</p></div></body></html>`;
  const { store, key } = await stored(join(dir, 'held.db'), mime(html));
  const full = createViewService(store, LIMITS, log);
  try {
    const v = (await full.get(key))!;
    assert.equal(v.htmlCheck?.error, null);
    assert.ok(v.htmlCheck?.features.some((f) => f.feature === 'display:flex'), 'the HTML as sent was checked');
    assert.equal(v.language, 'en');
  } finally {
    await full.close();
  }
  const { store: store2, key: key2 } = await stored(join(dir, 'held-over.db'), mime(html));
  const short = createViewService(store2, LIMITS, log, { budgets: { htmlCheck: 1 } });
  try {
    const v = (await short.get(key2))!;
    assert.equal(v.htmlCheck?.error, 'over_budget', 'its own budget, not the parse\'s');
    assert.equal(v.language, 'en', 'derived before the check ended the worker');
    assert.match(String(v.htmlBody), /weekly newsletter/, 'the parse kept');
  } finally {
    await short.close();
    await store.close();
    await store2.close();
  }
});
