// What a node logs about its Redis connections (assemble-redis.ts): a connection the server drops is
// "lost; reconnecting" and then "restored"; a client the node closes on purpose (stop) is no outage.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { openRedisBackends } from '../../src/assemble-redis.ts';
import { loadConfig } from '../../src/config.ts';
import { captureLog } from '../helpers/log.ts';
import { until } from '../helpers/time.ts';
import { SKIP_SERVER, describeRedis, startRedis, type RedisProcess } from './servers.ts';

describeRedis('Redis connection log', { skip: SKIP_SERVER }, () => {
  let redis: RedisProcess;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());

  test('a dropped connection is logged lost, then restored; closing on purpose logs no outage', async () => {
    const captured = captureLog('info');
    const backends = await openRedisBackends(loadConfig({ EPHEMAIL_STORE: redis.url }), captured.log);
    const lost = () => captured.find('redis connection lost').length;
    try {
      // the private server drops the store's connection (not the bus subscriber's): a clean close, no error
      const kill = spawnSync('redis-cli', ['-p', String(redis.port), 'CLIENT', 'KILL', 'TYPE', 'normal'], { encoding: 'utf8' });
      assert.equal(kill.status, 0, kill.stderr);
      await until(() => captured.find('redis connection restored').length === 1, 'the store connection came back');
      assert.equal(lost(), 1, 'the drop was logged once');
      assert.equal(captured.find('redis connection lost')[0].role, 'store');
    } finally {
      await backends.bus.close();
      await backends.limiter.close();
      await backends.store.close();
    }
    // quiet window: no outage may be logged once the clients are closed on purpose (their sockets' close events come after quit() resolves)
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(lost(), 1, 'closing the clients on purpose is no outage');
    assert.equal(captured.find('redis connection error').length, 0);
  });
});
