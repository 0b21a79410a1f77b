// Opens Redis stores for the conformance suites: each open() gets its own key prefix under one run
// prefix; cleanup() deletes every key of the run and checks none is left.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { keyspace } from '../../src/redis/keys.ts';
import { createRedisStore } from '../../src/store/redis/redis-store.ts';
import type { Bus } from '../../src/bus/bus.ts';
import { createRedisBus } from '../../src/bus/redis.ts';
import type { Store } from '../../src/store/store.ts';
import { countPrefix, dropPrefix } from '../redis/servers.ts';
import { until } from '../helpers/time.ts';

/** Resolves once `to` hears a publish of `from` (publishing again every turn of until() until it does). */
async function hears(from: Bus, to: Bus): Promise<void> {
  const probe = `probe-${randomUUID().slice(0, 8)}@ephemail.test`;
  let heard = false;
  const unsubscribe = to.subscribe(probe, () => (heard = true));
  try {
    await until(async () => {
      if (!heard) await from.publish(probe, 'probe');
      return heard;
    }, 'the other node hears a publish');
  } finally {
    unsubscribe();
  }
}

export interface RedisHarness {
  runPrefix: string;
  /** A connected client to `url` (closed by cleanup). */
  client(): Promise<RedisClient>;
  /** A store on a fresh prefix. */
  open(): Promise<Store>;
  /** A fresh key prefix under the run prefix. */
  prefix(): string;
  /** How many webhook event bodies the store opened last holds (its `{wh}:b:` keys). */
  webhookBodies(): Promise<number>;
  /** Two buses ("two nodes", each with its own publisher and subscriber) on a fresh channel. */
  buses(): Promise<{ a: Bus; b: Bus; close(): Promise<void> }>;
  cleanup(): Promise<void>;
}

export function redisHarness(url: () => string): RedisHarness {
  const runPrefix = `ephtest:${randomUUID().slice(0, 8)}:`;
  const clients: RedisClient[] = [];
  let lastPrefix = '';
  const h: RedisHarness = {
    runPrefix,
    prefix: () => `${runPrefix}${randomUUID().slice(0, 6)}:`,
    async client() {
      const c = connect(parseRedisUrl(url()));
      c.on('error', () => undefined);
      clients.push(c);
      await whenReady(c, 10_000);
      return c;
    },
    async open() {
      const target = parseRedisUrl(url());
      const c = connect(target);
      c.on('error', () => undefined);
      await whenReady(c, 10_000);
      lastPrefix = h.prefix();
      return createRedisStore({ client: c, keys: keyspace(lastPrefix), cluster: target.cluster });
    },
    async webhookBodies() {
      // a client of its own, closed at once: the suite may run after cleanup() closed the others
      const c = connect(parseRedisUrl(url()));
      c.on('error', () => undefined);
      try {
        await whenReady(c, 10_000);
        return await countPrefix(c as never, `${lastPrefix}{wh}:b:`);
      } finally {
        await closeClient(c);
      }
    },
    async buses() {
      const target = parseRedisUrl(url());
      const channel = keyspace(h.prefix()).channel;
      const node = async () => {
        const publisher = connect(target);
        await whenReady(publisher, 10_000);
        return { bus: createRedisBus({ publisher, subscriber: connect(target, { subscriber: true }), channel, cluster: target.cluster }), publisher };
      };
      const a = await node();
      const b = await node();
      // each node's channel subscription is up once a publish of the other reaches it
      await hears(a.bus, b.bus);
      await hears(b.bus, a.bus);
      return {
        a: a.bus,
        b: b.bus,
        async close() {
          await a.bus.close();
          await b.bus.close();
          await closeClient(a.publisher);
          await closeClient(b.publisher);
        },
      };
    },
    async cleanup() {
      const c = await h.client();
      await dropPrefix(c as never, runPrefix);
      assert.equal(await countPrefix(c as never, runPrefix), 0, 'every key the tests wrote is gone');
      for (const x of clients) await closeClient(x);
    },
  };
  return h;
}
