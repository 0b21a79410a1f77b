// The sender checks on Redis (docs/sender-checks.md): `html_check` and `spam` live in the derived
// views document, which both stores keep as one opaque value; two nodes on one Redis read the same
// verdicts, and the second node asks spamd nothing.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { FAKE_REPORT, fakeSpamd } from '../helpers/spamd.ts';
import { SKIP_REDIS, TEST_REDIS_URL, describeRedis, dropPrefix, testStoreUrl } from './servers.ts';

describeRedis('sender checks on Redis', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  const prefix = `eph-sc-${randomUUID().slice(0, 8)}:`;
  let redis: RedisClient;
  let fake: Awaited<ReturnType<typeof fakeSpamd>>;
  let a: TestService;
  let b: TestService;
  before(async () => {
    redis = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(redis, 10_000);
    fake = await fakeSpamd(FAKE_REPORT);
    const env = {
      EPHEMAIL_STORE: testStoreUrl(prefix),
      EPHEMAIL_SESSION_SECRET: 'sender-checks-test-secret-of-at-least-32-bytes',
      EPHEMAIL_SPAMD: `127.0.0.1:${fake.port}`,
    };
    a = await startService(env);
    b = await startService(env);
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    fake?.server.close();
    if (redis) {
      await dropPrefix(redis, prefix);
      redis.disconnect();
    }
  });

  test('a newsletter read on node A: html_check and spam; node B reads the same, without asking spamd again', async () => {
    const to = 'redis-news@ephemail.test';
    await a.send({ to, subject: 'News', text: 'News', html: '<html><head><style>.r{display:flex}</style></head><body><div class="r" style="display:flex">x</div></body></html>' });
    const read = async (svc: TestService) => ((await (await svc.api(`/api/v1/inboxes/${to}/latest`)).json()) as { data: { html_check: { features: { feature: string }[] } | null; spam: unknown } }).data;
    const onA = await read(a);
    const features = onA.html_check?.features.map((f) => f.feature) ?? [];
    assert.ok(features.includes('<style> element') && features.includes('display:flex'), features.join(', '));
    assert.deepEqual(onA.spam, { score: 2.3, threshold: 5, is_spam: false, truncated: false, rules: [
      { name: 'MISSING_DATE', score: 2.7, description: 'Missing Date: header' },
      { name: 'SOME_LONG_RULE', score: -0.4, description: 'A description that goes on and on and wraps onto the next line' },
    ] });
    // the views are written in the background after A's read: wait for that write, then read on B
    const id = ((await (await a.api(`/api/v1/inboxes/${to}/latest`)).json()) as { data: { id: string } }).data.id;
    const row = await a.service.core.store.getEmail(id, Date.now());
    await a.service.core.views.stored(row!.messageKey);
    const onB = await read(b);
    assert.deepEqual({ html_check: onB.html_check, spam: onB.spam }, { html_check: onA.html_check, spam: onA.spam });
    assert.equal(fake.connections, 1, 'spamd was asked once');
  });
});
