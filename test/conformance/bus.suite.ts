// The one Bus conformance suite. open() returns the buses of "two nodes" (the memory bus: the same
// instance twice); a publish on one wakes the subscribers on the other. A subscription is in force
// when subscribe() returns (the Bus contract): nothing to wait for before publishing. The harness
// hands over buses whose nodes already hear each other.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Bus } from '../../src/bus/bus.ts';

export interface BusHarness {
  open(): Promise<{ a: Bus; b: Bus; close(): Promise<void> }>;
  cleanup?(): Promise<void>;
  skip?: string | false;
}

const address = () => `${randomUUID().slice(0, 8)}@ephemail.test`;

/** Resolves with the first `n` events, or what arrived by `ms`. */
function collect(bus: Bus, addr: string, n: number, ms = 2000): { events: Promise<string[]>; stop(): void } {
  const got: string[] = [];
  let stop = () => {};
  const events = new Promise<string[]>((resolve) => {
    const timer = setTimeout(() => finish(), ms);
    const unsubscribe = bus.subscribe(addr, (id) => {
      got.push(id);
      if (got.length >= n) finish();
    });
    function finish() {
      clearTimeout(timer);
      unsubscribe();
      resolve(got);
    }
    stop = finish;
  });
  return { events, stop };
}

export function busSuite(name: string, harness: BusHarness): void {
  if (harness.skip) {
    // one skipped test with the reason: a skipped describe would count as no test at all
    it(`Bus conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Bus conformance: ${name}`, { concurrency: 1 }, () => {
    it('a publish wakes every subscriber of that address on every node, in order where the backend keeps it', async () => {
      const { a, b, close } = await harness.open();
      try {
        const addr = address();
        const onA = collect(a, addr, 3);
        const onB = collect(b, addr, 3);
        const onB2 = collect(b, addr, 3);
        for (const id of ['1', '2', '3']) await a.publish(addr, id);
        // the publishing node's own listeners always hear its publishes in order
        assert.deepEqual(await onA.events, ['1', '2', '3']);
        // other nodes hear every publish exactly once; in publish order unless the backend says otherwise
        const remote = b.capabilities.orderedAcrossNodes ? (e: string[]) => e : (e: string[]) => [...e].sort();
        assert.deepEqual(remote(await onB.events), ['1', '2', '3']);
        assert.deepEqual(remote(await onB2.events), ['1', '2', '3']);
      } finally {
        await close();
      }
    });

    it('other addresses are not woken; an unsubscribed listener hears nothing more', async () => {
      const { a, b, close } = await harness.open();
      try {
        const addr = address();
        // quiet window: nothing may arrive for another address during these 300 ms (collect's deadline)
        const other = collect(b, address(), 1, 300);
        const heard: string[] = [];
        const unsubscribe = b.subscribe(addr, (id) => heard.push(id));
        const first = collect(b, addr, 1);
        await a.publish(addr, 'x');
        assert.deepEqual(await first.events, ['x']);
        unsubscribe();
        unsubscribe();
        const second = collect(b, addr, 1);
        await a.publish(addr, 'y');
        assert.deepEqual(await second.events, ['y']);
        assert.deepEqual(heard, ['x']);
        assert.deepEqual(await other.events, []);
      } finally {
        await close();
      }
    });

    it('a throwing listener does not stop the others', async () => {
      const { a, b, close } = await harness.open();
      try {
        const addr = address();
        const unsubscribe = b.subscribe(addr, () => {
          throw new Error('listener bug');
        });
        const ok = collect(b, addr, 1);
        await a.publish(addr, 'z');
        assert.deepEqual(await ok.events, ['z']);
        unsubscribe();
      } finally {
        await close();
      }
    });
  });
  if (harness.cleanup && !harness.skip) it(`${name}: cleanup`, async () => harness.cleanup!());
}
