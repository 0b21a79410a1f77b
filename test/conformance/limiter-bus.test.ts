// The limiter and bus conformance suites against the in-process backends and the shared Redis.
import { createMemoryBus } from '../../src/bus/memory.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { createRedisLimiter } from '../../src/limiter/redis.ts';
import { connect, parseRedisUrl, whenReady } from '../../src/redis/client.ts';
import { keyspace } from '../../src/redis/keys.ts';
import { SKIP_REDIS, TEST_REDIS_URL } from '../redis/servers.ts';
import { busSuite } from './bus.suite.ts';
import { limiterSuite } from './limiter.suite.ts';
import { redisHarness } from './redis-harness.ts';

limiterSuite('memory', { open: async () => createMemoryLimiter() });

const h = redisHarness(() => TEST_REDIS_URL);
limiterSuite('redis', {
  skip: SKIP_REDIS,
  cleanup: h.cleanup,
  async open() {
    const client = connect(parseRedisUrl(TEST_REDIS_URL));
    await whenReady(client, 10_000);
    return createRedisLimiter({ client, keys: keyspace(h.prefix()), ownsClient: true });
  },
});

busSuite('memory', {
  async open() {
    const bus = createMemoryBus();
    return { a: bus, b: bus, close: () => bus.close() };
  },
});

busSuite('redis (two nodes)', {
  skip: SKIP_REDIS,
  open: h.buses,
});
