// The store, limiter and bus conformance suites against a real 3-master Redis Cluster started on
// loopback for this file (redis-cli --cluster create), stopped afterwards.
import { after, before } from 'node:test';
import { createRedisBus } from '../../src/bus/redis.ts';
import { createRedisLimiter } from '../../src/limiter/redis.ts';
import { connect, parseRedisUrl, whenReady } from '../../src/store/redis/client.ts';
import { keyspace } from '../../src/store/redis/keys.ts';
import { closeClient } from '../../src/store/redis/redis-store.ts';
import { SKIP_SERVER, startCluster, type RedisCluster } from '../redis/servers.ts';
import { busSuite } from './bus.suite.ts';
import { limiterSuite } from './limiter.suite.ts';
import { redisHarness } from './redis-harness.ts';
import { storeSuite } from './store.suite.ts';

let cluster: RedisCluster | null = null;
const url = () => cluster!.url;
const h = redisHarness(url);
if (!SKIP_SERVER) {
  before(async () => {
    cluster = await startCluster(3);
  });
  after(async () => {
    await cluster?.stop();
  });
}
storeSuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER });

limiterSuite('redis cluster (3 masters)', {
  skip: SKIP_SERVER,
  async open() {
    const client = connect(parseRedisUrl(url()));
    await whenReady(client, 10_000);
    return createRedisLimiter({ client, keys: keyspace(h.prefix()), ownsClient: true });
  },
});

busSuite('redis cluster (3 masters, two nodes)', {
  skip: SKIP_SERVER,
  cleanup: h.cleanup,
  async open() {
    const target = parseRedisUrl(url());
    const channel = keyspace(h.prefix()).channel;
    const node = async () => {
      const publisher = connect(target);
      await whenReady(publisher, 10_000);
      return { bus: createRedisBus({ publisher, subscriber: connect(target, { subscriber: true }), channel, cluster: true }), publisher };
    };
    const a = await node();
    const b = await node();
    await new Promise((r) => setTimeout(r, 200));
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
});
