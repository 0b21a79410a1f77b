// Memory given back when quiet (src/idle-compact.ts): garbage that V8 would keep until its next
// growth-driven collection is collected once the process is quiet, and a spawned service does so
// once after start-up (its metric), never while it is busy.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startIdleCompaction } from '../../src/idle-compact.ts';
import { metric } from '../helpers/metrics.ts';
import { spawnServe } from '../helpers/serve.ts';
import { until } from '../helpers/time.ts';

test('a quiet process with garbage in its heap collects it: heapUsed falls back', async () => {
  let collections = 0;
  const stop = startIdleCompaction({ everyMs: 300, afterStartMs: 0, onCollect: () => collections++ });
  try {
    await until(() => collections === 1, 'the collection after start');
    const settled = process.memoryUsage().heapUsed;
    // ~40 MB of short-lived objects, kept until now, then dropped: garbage in the old generation
    let keep: string[][] | null = Array.from({ length: 40 }, (_, i) => Array.from({ length: 10_000 }, (_, j) => `${i}:${j}:${'x'.repeat(64)}`));
    const grown = process.memoryUsage().heapUsed;
    assert.ok(grown - settled > 20 * 1024 * 1024, `the heap grew (${grown - settled} bytes)`);
    keep = null;
    assert.equal(keep, null);
    await until(() => collections >= 2, 'a collection once quiet', 10_000, 50);
    const after = process.memoryUsage().heapUsed;
    assert.ok(after < grown - 20 * 1024 * 1024, `the garbage was collected: ${grown} -> ${after} bytes`);
  } finally {
    stop();
  }
});

test('a busy process is left to V8: no collection while the CPU is in use', async () => {
  let collections = 0;
  const stop = startIdleCompaction({ everyMs: 200, afterStartMs: 60_000, onCollect: () => collections++ });
  try {
    // busy for 1.2 s (6 intervals) while the heap grows: every interval's CPU share is far above 2 %
    const garbage: string[] = [];
    const end = performance.now() + 1200;
    while (performance.now() < end) {
      for (let i = 0; i < 2000; i++) garbage.push(`${i}${'y'.repeat(100)}`);
      if (garbage.length > 200_000) garbage.length = 0;
      await new Promise<void>((r) => setImmediate(r)); // unobservable: lets the interval's check run while busy
    }
    assert.equal(collections, 0);
  } finally {
    stop();
  }
});

test('a started service collects once after start-up (ephemail_idle_collections_total)', async () => {
  const svc = await spawnServe({});
  try {
    await until(async () => (await metric(svc.http, 'ephemail_idle_collections_total')) >= 1, 'the collection after start', 15_000, 100);
  } finally {
    svc.child.kill('SIGTERM');
  }
});
