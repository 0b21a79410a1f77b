// The conformance suites of every store seam (mail, keys, webhooks, faults, domains), the limiter
// and the bus against a real 3-master Redis Cluster started on loopback for this file
// (redis-cli --cluster create), stopped afterwards.
import { after, before } from 'node:test';
import { createRedisLimiter } from '../../src/limiter/redis.ts';
import { connect, parseRedisUrl, whenReady } from '../../src/redis/client.ts';
import { keyspace } from '../../src/redis/keys.ts';
import { SKIP_SERVER, startCluster, type RedisCluster } from '../redis/servers.ts';
import { busSuite } from './bus.suite.ts';
import { limiterSuite } from './limiter.suite.ts';
import { redisHarness } from './redis-harness.ts';
import { keySuite } from './keys.suite.ts';
import { mailSuite } from './mail.suite.ts';
import { webhookSuite } from './webhooks.suite.ts';
import { faultSuite } from './faults.suite.ts';
import { domainSuite } from './domains.suite.ts';

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
mailSuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER });
keySuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER });
webhookSuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER, bodies: h.webhookBodies });
faultSuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER });
domainSuite('redis cluster (3 masters)', { open: h.open, skip: SKIP_SERVER });

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
  open: h.buses,
});
