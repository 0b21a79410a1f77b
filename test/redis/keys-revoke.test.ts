// Revoking a key costs what that key's prefix matches, not the number of keys (issue 35 finding 11):
// on a private Redis and a 3-master Cluster, 300 keys, one revoked by its whole prefix; the commands
// Redis ran for it (INFO commandstats, reset just before; scripts' commands are counted too) stay
// a handful, where a scan of every key record ran one per key. Keys an earlier version added (no
// prefix index entry) are still found.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { closeClient, connect, parseRedisUrl, whenReady } from '../../src/redis/client.ts';
import { keyspace } from '../../src/redis/keys.ts';
import { createRedisStore } from '../../src/store/redis/redis-store.ts';
import type { Store } from '../../src/store/store.ts';
import { SKIP_SERVER, redisInfo, startCluster, startRedis, type RedisCluster, type RedisProcess } from './servers.ts';

const KEYS = 300;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const prefixOf = (n: number) => `eph_${Array.from({ length: 8 }, (_, i) => BASE62[Math.floor(n / 62 ** i) % 62]).join('')}`;

/** Commands the nodes ran since their last CONFIG RESETSTAT (INFO and CONFIG themselves left out). */
function commands(ports: number[]): number {
  let n = 0;
  for (const port of ports) {
    for (const m of redisInfo(port, 'INFO', 'commandstats').matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
      if (!/^(info|config)/.test(m[1])) n += Number(m[2]);
    }
  }
  return n;
}
const resetStats = (ports: number[]) => {
  for (const port of ports) redisInfo(port, 'CONFIG', 'RESETSTAT');
};

function revokeCost(name: string, start: () => Promise<{ url: string; ports: number[]; stop(): Promise<void> }>): void {
  describe(`revoking one key among many: ${name}`, { skip: SKIP_SERVER, concurrency: 1 }, () => {
    let server: { url: string; ports: number[]; stop(): Promise<void> };
    let store: Store;
    let prefix = '';
    before(async () => {
      server = await start();
      const target = parseRedisUrl(server.url);
      const client = connect(target);
      client.on('error', () => undefined);
      await whenReady(client, 10_000);
      prefix = `ephtest:${randomBytes(3).toString('hex')}:`;
      store = createRedisStore({ client, keys: keyspace(prefix), cluster: target.cluster });
    });
    after(async () => {
      await store?.close();
      await server?.stop();
    });

    test(`${KEYS} keys, one revoked by its whole prefix: a handful of commands, not one per key`, async () => {
      const now = Date.now();
      for (let i = 0; i < KEYS; i++) await store.addKey({ hash: randomBytes(32).toString('hex'), prefix: prefixOf(i), label: '', contactEmail: null, createdAt: now + i });
      resetStats(server.ports);
      const revoked = await store.revokeKeys(prefixOf(150), now + 1000);
      const ran = commands(server.ports);
      assert.deepEqual(revoked.map((k) => [k.prefix, k.revokedAt]), [[prefixOf(150), now + 1000]]);
      // the script (EVALSHA), its few reads and one write, the record read back: about 7 in all
      assert.ok(ran < 20, `revoking one key of ${KEYS} ran ${ran} commands (a scan of every key runs over ${KEYS})`);
      // a shorter prefix revokes what starts with it, and only that
      const some = await store.revokeKeys(prefixOf(151).slice(0, 5), now + 2000);
      assert.ok(some.length > 0 && some.every((k) => k.prefix.startsWith(prefixOf(151).slice(0, 5))));
      assert.equal((await store.listKeys()).filter((k) => k.revokedAt !== null).length, some.length + 1);
    });

    test('keys added before the prefix index (an earlier version) are found: the index is filled once', async () => {
      const client = connect(parseRedisUrl(server.url));
      client.on('error', () => undefined);
      await whenReady(client, 10_000);
      try {
        const k = keyspace(prefix);
        // an earlier version's key: its record and list entry, no index entry
        const hash = randomBytes(32).toString('hex');
        await client.hset(k.keyRecord(hash), 'p', 'eph_OLDOLDOL', 'l', '', 't', '1');
        await client.zadd(k.keyList, 1, hash);
        assert.deepEqual((await store.revokeKeys('eph_OLDOLDOL', 5000)).map((x) => x.hash), [hash]);
        assert.equal(await client.zcard(`${k.keysBase}px`), await client.zcard(k.keyList), 'every key indexed now');
      } finally {
        await closeClient(client);
      }
    });
  });
}

revokeCost('a private Redis', async () => {
  const r: RedisProcess = await startRedis();
  return { url: r.url, ports: [r.port], stop: () => r.stop() };
});
revokeCost('a 3-master Redis Cluster', async () => {
  const c: RedisCluster = await startCluster(3);
  return { url: c.url, ports: c.ports, stop: () => c.stop() };
});
