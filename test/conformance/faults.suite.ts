// The SMTP-fault part of the Store seam (src/store/faults.ts), run against every backend: the per-
// address (per key) and per-key limits, creation order, a key's own rules, uses counted atomically
// under parallel takes, expiry, the `dataRules` hint the receiver reads at RCPT, the operator's
// find and remove by address and by key, and a revoked key's rules applying no more.
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

    withStore('limits: per address (per key: another key still adds its own) and per key; expired rules neither count, list nor apply', async (store) => {
      const f = store.faults;
      const address = `full-${randomUUID().slice(0, 8)}@ephemail.test`;
      const keyHash = randomUUID().replace(/-/g, '');
      const other = 'x'.repeat(64);
      for (let i = 0; i < 3; i++) assert.equal(await f.addFault(rule({ address, keyHash }), 3, 10, NOW), 'ok');
      assert.equal(await f.addFault(rule({ address, keyHash }), 3, 10, NOW), 'address_full', 'the key has 3 on the address');
      for (let i = 0; i < 3; i++) assert.equal(await f.addFault(rule({ address, keyHash: other }), 3, 10, NOW), 'ok', 'another key adds its own');
      assert.equal(await f.addFault(rule({ address, keyHash: other }), 3, 10, NOW), 'address_full');
      assert.equal(await f.addFault(rule({ keyHash }), 20, 3, NOW), 'key_full', 'the key has 3 already');
      assert.equal(await f.addFault(rule({ keyHash }), 20, 4, NOW), 'ok', 'the refused add on a full address gave its place back');
      const later = NOW + 3600_000;
      assert.deepEqual(await f.listFaults(address, keyHash, later), []);
      assert.equal((await f.takeFault(address, 'rcpt', later)).rule, null);
      assert.equal(await f.addFault(rule({ address, keyHash, createdAt: later, expiresAt: later + 3600_000 }), 3, 1, later), 'ok', 'expired ones count no more');
    });

    withStore('the operator finds and removes rules by address (every key), by key (every address) or both', async (store) => {
      const f = store.faults;
      const [a1, a2] = [`op1-${randomUUID().slice(0, 8)}@ephemail.test`, `op2-${randomUUID().slice(0, 8)}@ephemail.test`];
      const [k1, k2] = [randomUUID().replace(/-/g, ''), randomUUID().replace(/-/g, '')];
      const r = [rule({ address: a1, keyHash: k1 }), rule({ address: a1, keyHash: k2, createdAt: NOW + 1 }), rule({ address: a2, keyHash: k1, createdAt: NOW + 2 }), rule({ address: a2, keyHash: k2, createdAt: NOW + 3 })];
      for (const x of r) assert.equal(await f.addFault(x, 20, 1000, NOW), 'ok');
      const ids = (list: FaultRule[]) => list.map((x) => x.id);
      assert.deepEqual(ids(await f.findFaults({ address: a1 }, NOW)), [r[0].id, r[1].id]);
      assert.deepEqual(ids(await f.findFaults({ keyHash: k1 }, NOW)), [r[0].id, r[2].id]);
      assert.deepEqual(ids(await f.findFaults({ address: a2, keyHash: k2 }, NOW)), [r[3].id]);
      assert.deepEqual(await f.findFaults({ keyHash: k1 }, NOW + 3600_000), [], 'expired');
      assert.equal(await f.removeFaults({ address: a2, keyHash: k2 }), 1);
      assert.equal(await f.removeFaults({ keyHash: k1 }), 2);
      assert.deepEqual(ids(await f.findFaults({ address: a1 }, NOW)), [r[1].id]);
      assert.deepEqual(await f.findFaults({ address: a2 }, NOW), []);
      assert.equal(await f.removeFaults({ address: a1 }), 1);
      assert.deepEqual(await f.findFaults({ keyHash: k2 }, NOW), []);
      assert.equal(await f.removeFaults({ keyHash: k2 }), 0);
      // the places were given back: k1 may add its whole share again
      for (let i = 0; i < 2; i++) assert.equal(await f.addFault(rule({ address: a1, keyHash: k1 }), 20, 2, NOW), 'ok');
    });

    withStore('a revoked key\'s rules apply no more, whoever revoked it; another key\'s rule on the address then answers', async (store) => {
      const f = store.faults;
      const address = `rev-${randomUUID().slice(0, 8)}@ephemail.test`;
      const hash = randomUUID().replace(/-/g, '') + randomUUID().replace(/-/g, '');
      const prefix = `eph_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
      await store.addKey({ hash, prefix, label: 'fault owner', contactEmail: null, createdAt: Date.now() });
      const blocking = rule({ address, keyHash: hash, reply: '550 5.1.1 locked out' });
      const data = rule({ address, keyHash: hash, stage: 'data', reply: '554 5.7.1 locked out' });
      const own = rule({ address, keyHash: 'o'.repeat(64), reply: '451 4.7.1 the owner\'s rule', times: 1, remaining: 1 });
      for (const x of [blocking, data, own]) assert.equal(await f.addFault(x, 20, 1000, NOW), 'ok');
      const before = await f.takeFault(address, 'rcpt', NOW);
      assert.equal(before.rule?.id, blocking.id);
      assert.equal(before.dataRules, true);
      assert.equal((await store.revokeKeys(prefix, Date.now())).length, 1);
      const after = await f.takeFault(address, 'rcpt', NOW);
      assert.equal(after.rule?.id, own.id, 'the next live key\'s rule');
      assert.equal(after.dataRules, false, 'the revoked key\'s data rule counts no more');
      assert.equal((await f.takeFault(address, 'data', NOW)).rule, null);
      assert.deepEqual(await f.takeFault(address, 'rcpt', NOW), { rule: null, dataRules: false }, 'delivered');
    });
  });
}
