// The domain part of the Store seam (src/store/domains.ts), run against every backend: add, retire
// and add again, each idempotent; oldest first; the bound on active domains holds under parallel adds.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { storeTest, type StoreHarness } from './harness.ts';

const name = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}.example`;

export function domainSuite(suiteName: string, harness: StoreHarness): void {
  if (harness.skip) {
    it(`Domain store conformance: ${suiteName}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Domain store conformance: ${suiteName}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    withStore('add, add again (unchanged), retire, retire again (unchanged), add after retiring; listed oldest first', async (store) => {
      const d = store.domains;
      assert.deepEqual(await d.listDomains(), [], 'a fresh store has none');
      const [a, b] = [name('a'), name('b')];
      assert.deepEqual(await d.addDomain(a, 1000, 10), { ok: true, changed: true, record: { domain: a, addedAt: 1000, retiredAt: null } });
      assert.deepEqual(await d.addDomain(b, 2000, 10), { ok: true, changed: true, record: { domain: b, addedAt: 2000, retiredAt: null } });
      assert.deepEqual(await d.addDomain(a, 3000, 10), { ok: true, changed: false, record: { domain: a, addedAt: 1000, retiredAt: null } }, 'an active one is untouched');
      assert.deepEqual((await d.listDomains()).map((r) => r.domain), [a, b]);

      assert.deepEqual(await d.retireDomain(a, 4000), { domain: a, addedAt: 1000, retiredAt: 4000 });
      assert.deepEqual(await d.retireDomain(a, 5000), { domain: a, addedAt: 1000, retiredAt: 4000 }, 'the first retirement time stays');
      assert.equal(await d.retireDomain(name('never'), 5000), null, 'never added');
      assert.deepEqual(await d.listDomains(), [{ domain: a, addedAt: 1000, retiredAt: 4000 }, { domain: b, addedAt: 2000, retiredAt: null }]);

      assert.deepEqual(await d.addDomain(a, 6000, 10), { ok: true, changed: true, record: { domain: a, addedAt: 6000, retiredAt: null } }, 'added again');
      assert.deepEqual((await d.listDomains()).map((r) => [r.domain, r.addedAt, r.retiredAt]), [[b, 2000, null], [a, 6000, null]]);
    });

    withStore('at most maxActive active domains, atomically; retired ones do not count; an active one is always re-added', async (store) => {
      const d = store.domains;
      const names = Array.from({ length: 8 }, (_, i) => name(`p${i}`));
      const results = await Promise.all(names.map((n, i) => d.addDomain(n, 1000 + i, 3)));
      assert.equal(results.filter((r) => r.ok).length, 3, 'parallel adds never pass the bound');
      for (const r of results) if (!r.ok) assert.equal(r.active, 3);
      const active = (await d.listDomains()).filter((r) => r.retiredAt === null);
      assert.equal(active.length, 3);
      assert.deepEqual(await d.addDomain(active[0].domain, 9000, 3), { ok: true, changed: false, record: active[0] }, 'at the bound an active one is still answered');
      assert.deepEqual(await d.retireDomain(active[0].domain, 9000), { ...active[0], retiredAt: 9000 });
      const late = name('late');
      assert.equal((await d.addDomain(late, 9500, 3)).ok, true, 'a retired one freed its place');
      assert.deepEqual(await d.addDomain(active[0].domain, 9600, 3), { ok: false, active: 3 }, 'adding a retired one again needs a place too');
    });
  });

  if (harness.cleanup && !harness.skip) {
    it(`${suiteName}: domains cleanup`, async () => harness.cleanup!());
  }
}
