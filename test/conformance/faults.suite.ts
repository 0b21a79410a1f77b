// The SMTP-fault part of the Store seam (src/store/faults.ts), run against every backend: the per-
// address and per-key limits, creation order, a key's own rules, uses counted atomically under
// parallel takes, expiry, and the `dataRules` hint the receiver reads at RCPT.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { FaultRule } from '../../src/store/faults.ts';
import { storeTest, type StoreHarness } from './harness.ts';

const NOW = 1_800_000_000_000;
const rule = (over: Partial<FaultRule> = {}): FaultRule => ({
  id: `flt_${randomUUID()}`, keyHash: 'k'.repeat(64), address: `f-${randomUUID().slice(0, 8)}@ephemail.test`, stage: 'rcpt',
  reply: '451 4.7.1 Try again later', delaySeconds: null, disconnect: false, times: null, remaining: null,
  createdAt: NOW, expiresAt: NOW + 3600_000, ...over,
});

export function faultSuite(name: string, harness: StoreHarness): void {
  if (harness.skip) {
    it(`Fault store conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Fault store conformance: ${name}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    withStore('add, list in creation order (a key sees its own), delete one, clear; an address without rules', async (store) => {
      const f = store.faults;
      const address = `order-${randomUUID().slice(0, 8)}@ephemail.test`;
      const a = rule({ address, times: 2, remaining: 2 });
      const b = rule({ address, stage: 'data', reply: null, delaySeconds: 20 });
      const c = rule({ address, stage: 'data', reply: null, disconnect: true, keyHash: 'o'.repeat(64) });
      for (const r of [a, b, c]) assert.equal(await f.addFault(r, 20, 1000, NOW), 'ok');
      assert.deepEqual(await f.listFaults(address, a.keyHash, NOW), [a, b]);
      assert.deepEqual(await f.listFaults(address, c.keyHash, NOW), [c]);
      assert.equal(await f.deleteFault(address, c.keyHash, a.id), false, 'not its rule');
      assert.equal(await f.deleteFault(address, a.keyHash, a.id), true);
      assert.equal(await f.deleteFault(address, a.keyHash, a.id), false);
      assert.deepEqual(await f.listFaults(address, a.keyHash, NOW), [b]);
      assert.equal(await f.clearFaults(address, a.keyHash), 1);
      assert.deepEqual(await f.listFaults(address, c.keyHash, NOW), [c], 'another key\'s rule stays');
      assert.deepEqual(await f.takeFault('nobody@ephemail.test', 'rcpt', NOW), { rule: null, dataRules: false });
    });

    withStore('takeFault: the first live rule of the stage, remaining down by one, used up after times; dataRules', async (store) => {
      const f = store.faults;
      const address = `take-${randomUUID().slice(0, 8)}@ephemail.test`;
      const first = rule({ address, times: 2, remaining: 2, reply: '451 4.7.1 first' });
      const second = rule({ address, reply: '550 5.1.1 second' });
      const data = rule({ address, stage: 'data', reply: '554 5.7.1 data', times: 1, remaining: 1 });
      for (const r of [first, second, data]) await f.addFault(r, 20, 1000, NOW);
      const t1 = await f.takeFault(address, 'rcpt', NOW);
      assert.equal(t1.rule?.id, first.id);
      assert.equal(t1.rule?.remaining, 2, 'as it was before the use');
      assert.equal(t1.dataRules, true);
      assert.equal((await f.takeFault(address, 'rcpt', NOW)).rule?.id, first.id);
      assert.equal((await f.takeFault(address, 'rcpt', NOW)).rule?.id, second.id, 'the first is used up');
      assert.equal((await f.takeFault(address, 'rcpt', NOW)).rule?.id, second.id, 'unlimited');
      const d = await f.takeFault(address, 'data', NOW);
      assert.equal(d.rule?.id, data.id);
      assert.equal(d.dataRules, false, 'the data rule is used up');
      assert.equal((await f.takeFault(address, 'data', NOW)).rule, null);
      assert.deepEqual((await f.listFaults(address, first.keyHash, NOW)).map((r) => r.remaining), [0, null, 0], 'used-up rules stay listed');
    });

    withStore('parallel takes use a limited rule exactly `times` times', async (store) => {
      const f = store.faults;
      const address = `race-${randomUUID().slice(0, 8)}@ephemail.test`;
      const r = rule({ address, times: 5, remaining: 5 });
      await f.addFault(r, 20, 1000, NOW);
      const out = await Promise.all(Array.from({ length: 12 }, () => f.takeFault(address, 'rcpt', NOW)));
      assert.equal(out.filter((t) => t.rule).length, 5);
      assert.deepEqual((await f.listFaults(address, r.keyHash, NOW)).map((x) => x.remaining), [0]);
    });

    withStore('limits: per address (any key) and per key; expired rules neither count, list nor apply', async (store) => {
      const f = store.faults;
      const address = `full-${randomUUID().slice(0, 8)}@ephemail.test`;
      const keyHash = randomUUID().replace(/-/g, '');
      for (let i = 0; i < 3; i++) assert.equal(await f.addFault(rule({ address, keyHash: i === 0 ? 'x'.repeat(64) : keyHash }), 3, 10, NOW), 'ok');
      assert.equal(await f.addFault(rule({ address, keyHash }), 3, 10, NOW), 'address_full');
      assert.equal(await f.addFault(rule({ keyHash }), 20, 2, NOW), 'key_full', 'the key has 2 already');
      assert.equal(await f.addFault(rule({ keyHash }), 20, 3, NOW), 'ok', 'the refused add on a full address gave its place back');
      const later = NOW + 3600_000;
      assert.deepEqual(await f.listFaults(address, keyHash, later), []);
      assert.equal((await f.takeFault(address, 'rcpt', later)).rule, null);
      assert.equal(await f.addFault(rule({ address, keyHash, createdAt: later, expiresAt: later + 3600_000 }), 3, 1, later), 'ok', 'expired ones count no more');
    });
  });
}
