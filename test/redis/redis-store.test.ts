// Redis-only properties the shared suites cannot see: the Lua id layout equals domain/ids.ts, the
// slot written into ids, TTLs set by Redis itself, API keys never expiring, one subscriber per node,
// and fast StoreUnavailableError while Redis is away.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRedisBus } from '../../src/bus/redis.ts';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import { formatUuidV7, uuidTimestamp } from '../../src/domain/ids.ts';
import { connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { addressSlot, idSlot, keySlot, keyspace } from '../../src/redis/keys.ts';
import { createRedisStore } from '../../src/store/redis/redis-store.ts';
import { createRedisLimiter } from '../../src/limiter/redis.ts';
import { inbox, newEmail } from '../conformance/harness.ts';
import { redisHarness } from '../conformance/redis-harness.ts';
import { until } from '../helpers/time.ts';
import { SKIP_REDIS, SKIP_SERVER, TEST_REDIS_URL, startRedis, describeRedis } from './servers.ts';

describeRedis('Redis store specifics', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  const h = redisHarness(() => TEST_REDIS_URL);
  let client: RedisClient;
  before(async () => {
    client = await h.client();
  });
  after(async () => h.cleanup());

  it('ids from the Lua script have exactly the layout of domain/ids.ts, with the inbox slot in the low bits', async () => {
    const keys = keyspace(h.prefix());
    const store = createRedisStore({ client, keys, cluster: false, ownsClient: false });
    const before = Date.now();
    const addrs = Array.from({ length: 20 }, () => inbox());
    const res = await store.addEmails(addrs.map((a) => newEmail(a)));
    for (const [i, s] of res.entries()) {
      const hex = s.id.replace(/-/g, '');
      const ms = uuidTimestamp(s.id);
      const counter = (BigInt('0x' + hex.slice(13, 16)) << 30n) | (BigInt('0x' + hex.slice(16, 24)) & ((1n << 30n) - 1n));
      const low = parseInt(hex.slice(24), 16);
      assert.equal(formatUuidV7(ms, counter, low), s.id);
      assert.ok(Math.abs(ms - before) < 5000, 'server TIME');
      assert.equal(idSlot(s.id), addressSlot(addrs[i]));
      assert.equal(keySlot(keys.email(s.id)), keySlot(keys.index(addrs[i])), 'email and index share a slot');
    }
  });

  it('Redis expires email data itself; API keys never expire', async () => {
    const keys = keyspace(h.prefix());
    const store = createRedisStore({ client, keys, cluster: false, ownsClient: false });
    const a = inbox();
    const [e] = await store.addEmails([newEmail(a, { expiresAt: Date.now() + 60_000, hasAttachments: true })]);
    const mk = (await store.getEmail(e.id, Date.now()))!.messageKey;
    await store.putViews(mk, '{}', [Buffer.from('x')]);
    for (const key of [keys.email(e.id), keys.message(mk), `${keys.message(mk)}:r`, `${keys.message(mk)}:p:0`, keys.index(a)]) {
      const ttl = await client.pttl(key);
      assert.ok(ttl > 50_000 && ttl <= 60_000, `${key} ttl ${ttl}`);
    }
    await store.addKey({ hash: 'h'.repeat(64), prefix: 'eph_test0001', label: '', contactEmail: null, createdAt: Date.now() });
    assert.equal(await client.pttl(keys.keyRecord('h'.repeat(64))), -1);
    assert.equal(await client.pttl(keys.keyList), -1);
    const [gone] = await store.addEmails([newEmail(a, { expiresAt: Date.now() + 300 })]);
    await until(async () => (await client.exists(keys.email(gone.id))) === 0, 'Redis expired the email');
    assert.deepEqual((await store.listEmails(a, { limit: 10 }, Date.now())).map((x) => x.id), [e.id]);
  });

  it('the bus holds ONE subscription per node, however many waiters', async () => {
    const keys = keyspace(h.prefix());
    const sub = connect(parseRedisUrl(TEST_REDIS_URL), { subscriber: true });
    const bus = createRedisBus({ publisher: client, subscriber: sub, channel: keys.channel });
    const offs = Array.from({ length: 50 }, (_, i) => bus.subscribe(`w${i % 7}@ephemail.test`, () => undefined));
    const numsub = async () => ((await client.call('PUBSUB', 'NUMSUB', keys.channel)) as [string, number])[1];
    await until(async () => (await numsub()) > 0, 'the bus subscribed');
    assert.equal(await numsub(), 1);
    offs.forEach((off) => off());
    await bus.close();
  });
});

describeRedis('Redis away: commands fail fast as StoreUnavailableError, then recover', { skip: SKIP_SERVER }, () => {
  it('fails fast while down and serves again after restart, with no new client', async () => {
    const redis = await startRedis();
    const client = connect(parseRedisUrl(redis.url));
    client.on('error', () => undefined);
    try {
      await whenReady(client, 10_000);
      const store = createRedisStore({ client, keys: keyspace('eph:'), cluster: false, ownsClient: false });
      const limiter = createRedisLimiter({ client, keys: keyspace('eph:') });
      await store.ping();
      await redis.kill();
      await until(() => client.status !== 'ready', 'the client saw the connection drop');
      for (const op of [() => store.ping(), () => store.addEmails([newEmail(inbox())]), () => store.listEmails(inbox(), { limit: 1 }, Date.now()), () => limiter.hit('b', { perMinute: 1, perDay: 1 }, Date.now())]) {
        const t = Date.now();
        await assert.rejects(op(), StoreUnavailableError);
        // bound: a queued command would wait for the reconnect (never, here); one-sided, generous for a loaded machine
        assert.ok(Date.now() - t < 3000, 'fails fast, nothing queued');
      }
      assert.equal((await limiter.peek('b', { perMinute: 5, perDay: 5 }, Date.now())).allowed, true, 'peek reports an empty window');
      await redis.start();
      await whenReady(client, 10_000);
      await store.ping();
      assert.equal((await store.addEmails([newEmail(inbox())])).length, 1);

      // a Redis that hangs rather than disconnects: health's ping gives up after 2 s
      const pauser = connect(parseRedisUrl(redis.url));
      await whenReady(pauser, 10_000);
      await pauser.call('CLIENT', 'PAUSE', '4000', 'ALL');
      const t = Date.now();
      await assert.rejects(store.ping(), StoreUnavailableError);
      // bound: given up after 2 s, before the 4 s pause ends (an unbounded ping would succeed then)
      assert.ok(Date.now() - t < 4000, 'ping is bounded');
      pauser.disconnect();
      await until(() => store.ping().then(() => true, () => false), 'the paused Redis answered again', 10_000);
    } finally {
      client.disconnect();
      await redis.stop();
    }
  });
});
