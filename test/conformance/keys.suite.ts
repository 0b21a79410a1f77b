// The key seam's conformance suite (src/store/keys.ts KeyStore): every backend runs it unchanged.
// (How many keys an IP may mint is the limiter's: limiter.suite.ts "take".)
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { KeyStore, NewKey } from '../../src/store/keys.ts';
import { storeTest, type StoreHarness } from './harness.ts';

const key = (prefix: string, createdAt: number, hash = randomBytes(32).toString('hex')): NewKey => ({
  hash, prefix, label: `label ${prefix}`, contactEmail: null, createdAt,
});

export function keySuite(name: string, harness: StoreHarness<KeyStore>): void {
  if (harness.skip) {
    // one skipped test with the reason: a skipped describe would count as no test at all
    it(`Key store conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Key store conformance: ${name}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    withStore('addKey, then findKey, listKeys (oldest first) and revokeKeys (prefix match, once)', async (store) => {
      const now = Date.now();
      const k1 = { ...key('eph_abc12345', now - 3000), contactEmail: 'ops@example.org', label: 'CI' };
      const k2 = key('eph_abd12345', now - 2000);
      const k3 = key('eph_xyz12345', now - 1000);
      for (const k of [k3, k1, k2]) await store.addKey(k);
      assert.deepEqual(await store.findKey(k1.hash), { ...k1, revokedAt: null, lastUsedAt: null });
      assert.equal(await store.findKey('0'.repeat(64)), null);
      assert.deepEqual((await store.listKeys()).map((k) => k.prefix), ['eph_abc12345', 'eph_abd12345', 'eph_xyz12345']);
      const revoked = await store.revokeKeys('eph_ab', now);
      assert.deepEqual(revoked.map((k) => k.prefix).sort(), ['eph_abc12345', 'eph_abd12345']);
      assert.ok(revoked.every((k) => k.revokedAt === now));
      assert.deepEqual(await store.revokeKeys('eph_ab', now + 1), [], 'a revoked key is not revoked again');
      assert.deepEqual(await store.revokeKeys('eph_q', now), []);
      assert.equal((await store.findKey(k2.hash))?.revokedAt, now, 'findKey returns revoked keys too');
      assert.equal((await store.findKey(k3.hash))?.revokedAt, null);
      assert.deepEqual((await store.listKeys()).map((k) => [k.prefix, k.revokedAt]), [['eph_abc12345', now], ['eph_abd12345', now], ['eph_xyz12345', null]]);
      assert.deepEqual(await store.revokeKeys('eph_xyz12345', now), [{ ...k3, revokedAt: now, lastUsedAt: null }], 'a whole prefix matches');
    });

    withStore('touchKey records the latest use (never an earlier one), read by findKey, listKeys and revokeKeys; an unknown hash stays unknown', async (store) => {
      const now = Date.now();
      const k = key('eph_use12345', now - 5000);
      await store.addKey(k);
      await store.touchKey(k.hash, now - 1000);
      assert.equal((await store.findKey(k.hash))?.lastUsedAt, now - 1000);
      await store.touchKey(k.hash, now - 2000);
      assert.equal((await store.findKey(k.hash))?.lastUsedAt, now - 1000, 'an earlier time (another node, late) does not win');
      await Promise.all([store.touchKey(k.hash, now), store.touchKey(k.hash, now - 500)]);
      assert.deepEqual((await store.listKeys()).map((x) => [x.prefix, x.lastUsedAt]), [['eph_use12345', now]]);
      const missing = '1'.repeat(64);
      await store.touchKey(missing, now);
      assert.equal(await store.findKey(missing), null, 'a use of no key creates none');
      assert.deepEqual((await store.revokeKeys('eph_use12345', now + 1)).map((x) => x.lastUsedAt), [now]);
    });
  });

  if (harness.cleanup && !harness.skip) {
    it(`${name}: key cleanup`, async () => harness.cleanup!());
  }
}
