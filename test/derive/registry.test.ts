// The views registry (src/derive/registry.ts): a view registered there is derived with the others
// (on the workers too when the registry is injected), kept with them, derived again when its version
// changes, and falls back when its budget runs out; the document is made by one loop over the
// registry, full or fallback. How the views are shown: test/http/email-views.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { minimalMessage, parseForViews } from '../../src/derive/message.ts';
import { isCurrent, STORED_VIEWS, VIEWS_VERSION, type ParseView, type ServiceView, type StoredView } from '../../src/derive/registry.ts';
import { summarize } from '../../src/derive/summary.ts';
import { viewsOf } from '../../src/derive/views.ts';
import { createViewService } from '../../src/services/views.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { inbox, newEmail } from '../conformance/harness.ts';
import { WITH_WORDS } from './fixtures/registry.ts';

// This file's registries are TypeScript modules that the workers import (defineRegistry): its
// workers run the sources through tsx, not the built worker files npm test gives the others.
delete process.env.EPHEMAIL_TEST_BUILT_WORKERS;

const dir = mkdtempSync(join(tmpdir(), 'ephemail-registry-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const log = pino({ level: 'silent' });
const RAW = Buffer.from('From: "Shop" <news@shop.example>\r\nSubject: Weekly\r\nContent-Type: text/plain\r\n\r\nHello there, your code is 559120.\r\n');

/** A view registered by this test: the registry's types name the shipped views only. */
const register = (v: object) => v as unknown as StoredView;
type Doc = Record<string, unknown>;

async function stored(name: string) {
  const store = createSqliteStore(join(dir, `${name}.db`));
  const s = await summarize(new Uint8Array(RAW), LIMITS);
  const [row] = await store.addEmails([newEmail(inbox(), { raw: s.raw })]);
  return { store, key: (await store.getEmail(row.id, Date.now()))!.messageKey };
}

test('an injected registry\'s own views are derived on the derivation\'s workers, not only the shipped ones', { timeout: 120_000 }, async () => {
  const { store, key } = await stored('injected');
  const svc = createViewService(store, LIMITS, log, { registry: WITH_WORDS });
  try {
    const v = (await svc.get(key)) as unknown as Doc;
    assert.equal(v.words, 6, 'its parse view: derived in the parse task');
    assert.deepEqual(v.shout, { text: 'HELLO THERE, YOUR CODE IS 559120.', onWorker: true }, 'its worker view: a task of its own, on a worker');
    assert.deepEqual((v.codes as { value: string }[]).map((c) => c.value), ['559120'], 'the shipped views with them');
    await svc.stored(key);
    assert.equal(isCurrent(JSON.parse((await store.getViews(key))!), WITH_WORDS), true, 'kept whole: the next read derives nothing');
  } finally {
    await svc.close();
    await store.close();
  }
});

test('a registry with views of its own for the workers must be named by its module', async () => {
  const { store } = await stored('unnamed');
  const words = register({ name: 'words', stage: 'parse', version: 1, budget: null, wire: null, derive: () => 1, fallback: () => -1 });
  assert.throws(() => createViewService(store, LIMITS, log, { registry: [...STORED_VIEWS, words] }), /defineRegistry/);
  await store.close();
});

test('the document is one loop over the registry: a parse view is derived from the parse, and takes its fallback when no parser ran', async () => {
  const words: ParseView = register({ name: 'words', stage: 'parse', version: 1, budget: null, wire: null, derive: (m: { textBody: string | null }) => (m.textBody ?? '').split(/\s+/).filter(Boolean).length, fallback: () => -1 }) as ParseView;
  const registry = [...STORED_VIEWS, words];
  const full = viewsOf(await parseForViews(new Uint8Array(RAW), LIMITS), registry).views as unknown as Doc;
  assert.equal(full.words, 6);
  assert.equal(full.textBody, 'Hello there, your code is 559120.\r\n'.replace(/\r\n$/, '\n'));
  assert.deepEqual((full.codes as { value: string }[]).map((c) => c.value), ['559120']);
  const minimal = viewsOf(minimalMessage(new Uint8Array(RAW)), registry).views as unknown as Doc;
  assert.equal(minimal.words, -1, 'no parser ran: the fallback');
  assert.deepEqual(minimal.codes, [], 'every parse view takes its fallback');
  assert.equal(minimal.outcome, 'parse_over_budget');
  for (const v of registry) assert.ok(v.name in full && v.name in minimal, `${v.name} is in both documents`);
});

test('a kept document is current only with every registered view at its version', () => {
  const doc = { version: VIEWS_VERSION, ...Object.fromEntries(STORED_VIEWS.map((v) => [v.name, null])) };
  assert.equal(isCurrent(doc, STORED_VIEWS), true);
  const added = register({ name: 'extra', stage: 'service', version: 1, budget: 100, wire: null, derive: () => null, fallback: () => null });
  assert.equal(isCurrent(doc, [...STORED_VIEWS, added]), false, 'a new view: mail already stored gets it');
  const bumped = { ...STORED_VIEWS[0], version: 2 } as StoredView;
  assert.equal(isCurrent(doc, [bumped, ...STORED_VIEWS.slice(1)]), false, 'a changed view: derived again');
  assert.equal(isCurrent({ ...doc, versions: { to: 2 } }, [bumped, ...STORED_VIEWS.slice(1)]), true);
  assert.equal(isCurrent({ ...doc, version: VIEWS_VERSION - 1 }, STORED_VIEWS), false);
});

test('a view registered in a test is derived, kept, derived again at a new version, and falls back on its budget', { timeout: 120_000 }, async () => {
  const { store, key } = await stored('service-view');
  let calls = 0;
  const scored = (version: number): ServiceView => register({
    name: 'score', stage: 'service', version, budget: 5000, wire: null,
    derive: async (raw: Uint8Array) => {
      calls++;
      return { bytes: raw.byteLength, version };
    },
    fallback: () => ({ error: 'over budget' }),
  }) as ServiceView;
  const serviceWith = (view: StoredView) => createViewService(store, LIMITS, log, { registry: [...STORED_VIEWS, view] });
  const first = serviceWith(scored(1));
  try {
    const v = (await first.get(key)) as unknown as Doc;
    assert.deepEqual(v.score, { bytes: RAW.byteLength, version: 1 }, 'derived with the other views');
    assert.equal(v.textBody, 'Hello there, your code is 559120.\n');
    assert.equal(calls, 1);
    assert.deepEqual(((await first.get(key)) as unknown as Doc).score, v.score);
    assert.equal(calls, 1, 'cached');
    await first.stored(key);
  } finally {
    await first.close();
  }
  const again = serviceWith(scored(1));
  try {
    assert.deepEqual(((await again.get(key)) as unknown as Doc).score, { bytes: RAW.byteLength, version: 1 });
    assert.equal(calls, 1, 'kept in the store: a new service reads it without deriving');
  } finally {
    await again.close();
  }
  const next = serviceWith(scored(2));
  try {
    assert.deepEqual(((await next.get(key)) as unknown as Doc).score, { bytes: RAW.byteLength, version: 2 }, 'a new version: derived again');
    assert.equal(calls, 2);
    await next.stored(key);
    assert.deepEqual(JSON.parse((await store.getViews(key))!).versions, { score: 2 }, 'the document names the versions past 1');
  } finally {
    await next.close();
  }
  const stalled = register({ name: 'stall', stage: 'service', version: 1, budget: 200, wire: null, derive: () => new Promise(() => undefined), fallback: () => 'fell back' });
  const slow = createViewService(store, LIMITS, log, { registry: [...STORED_VIEWS, stalled] });
  try {
    const started = performance.now();
    const v = (await slow.get(key)) as unknown as Doc;
    assert.equal(v.stall, 'fell back', 'its budget ran out: its fallback');
    // bound: the read ended by the view's budget, not by the never-settling derivation; one-sided
    assert.ok(performance.now() - started < 60_000);
  } finally {
    await slow.close();
    await store.close();
  }
});
