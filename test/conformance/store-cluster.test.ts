// The store conformance suite against a real 3-master Redis Cluster started on loopback for this file.
import { after, before } from 'node:test';
import { SKIP_SERVER, startCluster, type RedisCluster } from '../redis/servers.ts';
import { redisHarness } from './redis-harness.ts';
import { storeSuite } from './store.suite.ts';

let cluster: RedisCluster | null = null;
const h = redisHarness(() => cluster!.url);
if (!SKIP_SERVER) {
  before(async () => {
    cluster = await startCluster(3);
  });
  after(async () => {
    await cluster?.stop();
  });
}
storeSuite('redis cluster (3 masters)', { open: h.open, cleanup: h.cleanup, skip: SKIP_SERVER });
