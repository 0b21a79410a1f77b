// The event stream's "from now" holds by construction (docs/push.md): the opening comment is written
// once the stream's cursor is fixed, so a client that has read it misses no mail sent afterwards —
// checked as "connect, read the opening comment, send one mail at once", 50 rounds, on SQLite and on
// Redis; and a stream whose first read fails is not live until a read succeeds (before, it said it
// was live and then took the next email as its cursor, skipping it).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { openStream } from '../helpers/sse.ts';
import { TEST_REDIS_URL, SKIP_REDIS, testStoreUrl } from '../redis/servers.ts';

const ROUNDS = 50;

const backends: [string, () => Record<string, string>, string | false][] = [
  ['SQLite', () => ({}), false],
  [
    'Redis',
    () => {
      return { EPHEMAIL_STORE: testStoreUrl(`ephtest:order:${randomUUID().slice(0, 8)}:`) };
    },
    SKIP_REDIS,
  ],
];

for (const [name, env, skip] of backends) {
  describe(`event stream on ${name}: the opening comment fixes "from now"`, { skip }, () => {
    let svc: TestService;
    let key: string;
    before(async () => {
      svc = await startService({ ...env(), EPHEMAIL_SESSION_SECRET: 'events-order-test-secret-of-at-least-32-bytes' });
      key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    });
    after(() => svc?.stop());

    test(`${ROUNDS} rounds of connect, read the opening comment, send one mail at once: ${ROUNDS} of ${ROUNDS} events`, { timeout: 120_000 }, async () => {
      let seen = 0;
      for (let i = 0; i < ROUNDS; i++) {
        const address = `order${i}-${randomUUID().slice(0, 6)}@ephemail.test`;
        const s = await openStream(`${svc.http}/api/v1/inboxes/${address}/events`, { authorization: `Bearer ${key}` });
        assert.equal(s.res.status, 200);
        await s.live();
        const sent = await sendRaw(svc.smtpPort, { from: 'a@sender.example', to: [address], body: message({ From: 'a@sender.example', Subject: `round ${i}` }, 'x') });
        assert.equal(sent.data?.code, 250);
        const [ev] = await s.until(1);
        assert.equal(JSON.parse(ev.data!).subject, `round ${i}`);
        seen++;
        await s.close();
      }
      assert.equal(seen, ROUNDS);
    });
  });
}

test('a stream whose first read fails says it is live only after a read succeeds, and misses no later mail', { timeout: 30_000 }, async () => {
  const svc = await startService();
  try {
    const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    const store = svc.service.core.store;
    const listEmails = store.listEmails.bind(store);
    let failures = 1;
    // the store's first list read fails (a transient error), later ones work
    store.listEmails = (async (...args: Parameters<typeof listEmails>) => {
      if (failures > 0) {
        failures--;
        throw new Error('transient store failure');
      }
      return listEmails(...args);
    }) as typeof store.listEmails;
    const address = 'first-read@ephemail.test';
    const s = await openStream(`${svc.http}/api/v1/inboxes/${address}/events`, { authorization: `Bearer ${key}` });
    assert.equal(s.res.status, 200);
    await s.live(5000);
    assert.equal(failures, 0, 'the failed read happened before the stream said it was live');
    const sent = await sendRaw(svc.smtpPort, { from: 'a@sender.example', to: [address], body: message({ From: 'a@sender.example', Subject: 'after live' }, 'x') });
    assert.equal(sent.data?.code, 250);
    const [ev] = await s.until(1);
    assert.equal(JSON.parse(ev.data!).subject, 'after live');
    await s.close();
  } finally {
    await svc.stop();
  }
});
