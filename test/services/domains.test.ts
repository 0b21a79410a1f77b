// The domain registry (services/domains.ts): EPHEMAIL_DOMAINS always first and active; a store that
// cannot be read at start leaves only them served, other domains getting a temporary answer (SMTP
// 451, API 500 with retry-after), never a permanent 550, until the store answers; a failed read
// later keeps the last domains read; an answer older than the one in use is dropped; the bound on
// active added domains is a conflict naming it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { loadConfig } from '../../src/config.ts';
import { AppError, StoreUnavailableError } from '../../src/domain/errors.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { addDomain, createDomainRegistry, MAX_ADDED_ACTIVE } from '../../src/services/domains.ts';
import type { DomainRecord } from '../../src/store/domains.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import type { Store } from '../../src/store/store.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const config = loadConfig({ EPHEMAIL_DOMAINS: 'one.test,two.test' });
const silent = pino({ level: 'silent' });

/** A SQLite store whose domain reads fail while `down` is set, and can be held to answer late. */
function flakyStore() {
  const store = createSqliteStore(':memory:');
  const state = { down: false, hold: null as Promise<void> | null };
  const list = store.domains.listDomains.bind(store.domains);
  const domains = {
    ...store.domains,
    listDomains: async (): Promise<DomainRecord[]> => {
      if (state.down) throw new StoreUnavailableError('domains unreachable (test)');
      const hold = state.hold; // a read started while held answers once released, with what it read
      const answer = await list();
      if (hold) await hold;
      return answer;
    },
  };
  const wrapped = Object.create(store) as Store;
  Object.defineProperty(wrapped, 'domains', { value: domains });
  return { store: wrapped, state };
}

test('EPHEMAIL_DOMAINS first and always active; an added domain after them; a retired one only serves reads', async () => {
  const { store } = flakyStore();
  const reg = createDomainRegistry({ config, store: store.domains, clock: { now: () => 1000 }, log: silent });
  await reg.refresh();
  assert.deepEqual(reg.active(), ['one.test', 'two.test']);
  assert.equal(reg.defaultDomain, 'one.test');
  await reg.add('Added.Example');
  assert.deepEqual(reg.active(), ['one.test', 'two.test', 'added.example'], 'a change made here is served here at once');
  assert.equal(reg.stateOf('added.example'), 'active');
  await reg.retire('added.example');
  assert.deepEqual(reg.active(), ['one.test', 'two.test']);
  assert.equal(reg.stateOf('added.example'), 'retired');
  assert.equal(reg.stateOf('other.example'), null);
  await assert.rejects(reg.retire('two.test'), (e: unknown) => e instanceof AppError && e.type === 'conflict' && /EPHEMAIL_DOMAINS/.test(e.message));
  await store.close();
});

test('a store that cannot be read: EPHEMAIL_DOMAINS only and "unavailable" for the rest until it answers; later failures keep the last read', async () => {
  const { store, state } = flakyStore();
  await store.domains.addDomain('added.example', 1000, 10);
  state.down = true;
  const reg = createDomainRegistry({ config, store: store.domains, clock: { now: () => 1000 }, log: silent });
  await assert.rejects(reg.refresh(), StoreUnavailableError);
  assert.deepEqual(reg.active(), ['one.test', 'two.test']);
  assert.equal(reg.stateOf('one.test'), 'active');
  assert.throws(() => reg.stateOf('added.example'), StoreUnavailableError, 'not refused: not known yet');
  state.down = false;
  await reg.refresh();
  assert.equal(reg.stateOf('added.example'), 'active');
  state.down = true;
  await assert.rejects(reg.refresh(), StoreUnavailableError);
  assert.equal(reg.stateOf('added.example'), 'active', 'the last domains read stay in use');
  assert.equal(reg.stateOf('other.example'), null);
  state.down = false;
  await store.close();
});

test('an answer older than the one in use is dropped (reads overlap)', async () => {
  const { store, state } = flakyStore();
  const reg = createDomainRegistry({ config, store: store.domains, clock: { now: () => 1000 }, log: silent });
  await reg.refresh();
  let release!: () => void;
  state.hold = new Promise((r) => (release = r));
  const slow = reg.refresh(); // read before the add, answers after it
  state.hold = null;
  await reg.add('late.example');
  assert.ok(reg.active().includes('late.example'));
  release();
  await slow;
  assert.ok(reg.active().includes('late.example'), 'the older answer did not replace the newer');
  await store.close();
});

test(`at most ${MAX_ADDED_ACTIVE} added domains active at once: the next is a conflict that says what to do`, async () => {
  const store = createSqliteStore(':memory:');
  for (let i = 0; i < MAX_ADDED_ACTIVE; i++) await addDomain(config, store.domains, `d${i}.example`, 1000 + i);
  await assert.rejects(addDomain(config, store.domains, 'one-more.example', 5000), (e: unknown) =>
    e instanceof AppError && e.type === 'conflict' && e.message === `${MAX_ADDED_ACTIVE} added domains are active already (at most ${MAX_ADDED_ACTIVE}); retire one first`);
  await store.close();
});

describe('over real sockets, the store unreadable at start', () => {
  let svc: TestService;
  let flaky: ReturnType<typeof flakyStore>;
  before(async () => {
    flaky = flakyStore();
    await flaky.store.domains.addDomain('added.example', Date.now(), 10);
    flaky.state.down = true;
    svc = await startService({ EPHEMAIL_DOMAINS: 'one.test' }, { backends: { store: flaky.store, bus: createMemoryBus(), limiter: createMemoryLimiter() } });
  });
  after(() => svc.stop());

  test('mail for an added domain is deferred (451, never 550), POST /inboxes 500 with retry-after; served once the store answers', async () => {
    const rcpt = async (to: string) => (await sendRaw(svc.smtpPort, { from: 's@example.org', to: [to], body: 'Subject: x\r\n\r\nx' })).rcpt[0];
    const deferred = await rcpt('x@added.example');
    assert.equal(deferred.code, 451);
    assert.match(deferred.text, /^4\.3\.0 /);
    assert.equal((await rcpt('x@one.test')).code, 250, 'EPHEMAIL_DOMAINS are served all along');
    const res = await svc.api('/api/v1/inboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"domain":"added.example"}' });
    assert.equal(res.status, 500);
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.deepEqual((await (await svc.api('/api/v1/domains')).json()).data, [{ domain: 'one.test' }]);
    flaky.state.down = false;
    await until(async () => (await rcpt('x@added.example')).code === 250, 'the next read (every second) serves it', 3000);
    assert.equal((await rcpt('x@other.example')).code, 550);
  });
});
