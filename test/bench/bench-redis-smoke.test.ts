// Keeps the Redis options of the benchmarks (`--store redis`, `--nodes 3`) working: each runs once in
// --quick mode (tiny sizes) against nodes on the test Redis (EPHEMAIL_TEST_REDIS_URL, a key prefix of
// their own, deleted after). Not a timing test: the figures are not judged. Skips, loudly, without Redis.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { benchApi } from '../../bench/api.ts';
import { type BenchOptions } from '../../bench/lib.ts';
import { benchLongPoll } from '../../bench/longpoll.ts';
import { benchIngest } from '../../bench/smtp.ts';

const REDIS_URL = process.env.EPHEMAIL_TEST_REDIS_URL ?? '';
const SKIP = REDIS_URL ? false : 'NO REDIS: EPHEMAIL_TEST_REDIS_URL is empty (start redis-server; the Redis benchmark smoke test cannot run)';
if (SKIP) console.error(`\n### ${SKIP} ###\n`);

const redisUrl = REDIS_URL ? `redis://${new URL(REDIS_URL).host}${new URL(REDIS_URL).pathname === '/' ? '' : new URL(REDIS_URL).pathname}` : '';
const one: BenchOptions = { quick: true, runs: 1, store: 'redis', nodes: 1, redisUrl };
const three: BenchOptions = { ...one, nodes: 3 };
const lines: string[] = [];
const log = (s: string) => lines.push(s);

/** Keys the benchmarks of this process left in the test Redis (they delete theirs on stop). */
async function leftovers(): Promise<number> {
  const u = new URL(redisUrl);
  const r = new Redis({ host: u.hostname, port: Number(u.port || 6379), db: Number(u.pathname.slice(1) || 0), lazyConnect: true });
  await r.connect();
  try {
    let n = 0;
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `bench-${process.pid}-*`, 'COUNT', 1000);
      cursor = next;
      n += keys.length;
    } while (cursor !== '0');
    return n;
  } finally {
    r.disconnect();
  }
}

after(() => {
  if (process.env.BENCH_SMOKE_VERBOSE) console.log(lines.join('\n'));
});

test('SMTP ingest, 3 nodes on Redis: every message is acknowledged and counted, RSS per node', { skip: SKIP }, async () => {
  const results = await benchIngest({ ...three, cases: ['text'] }, log);
  assert.equal(results.length, 1);
  const [r] = results;
  assert.equal(r.failed, 0);
  assert.ok(r.msgsPerSec.median > 0 && r.p99.median >= r.p50.median);
  assert.equal(r.peakRssPerNodeMb?.length, 3);
});

test('API reads, 1 node on Redis: the list and get routes and the bare ceiling answer', { skip: SKIP }, async () => {
  const results = await benchApi(one, log);
  assert.equal(results.length, 2);
  for (const r of results) {
    assert.equal(r.errors, 0, r.name);
    assert.ok(r.rps.median > 0 && r.bareRps.median > 0 && r.ratio > 0);
  }
});

test('long-poll, 3 nodes on Redis: every wait is woken, most by mail stored through another node', { skip: SKIP }, async () => {
  const r = await benchLongPoll(three, log);
  assert.equal(r.failed, 0);
  assert.ok(Number.isFinite(r.max.median));
  assert.equal(r.heldRssPerNodeMb?.length, 3);
  assert.ok((r.crossNode ?? 0) > 0, 'some wake-ups cross nodes');
});

test('the benchmarks left no keys in Redis', { skip: SKIP }, async () => {
  assert.equal(await leftovers(), 0);
});
