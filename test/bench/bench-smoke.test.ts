// Keeps the benchmarks working: each runs once in --quick mode (tiny sizes) against one service
// process, and its figures come out as numbers. Not a timing test: the figures are not judged.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { benchApi } from '../../bench/api.ts';
import { ROOT, rssOf, startService, type ServiceProcess } from '../../bench/lib.ts';
import { benchLongPoll } from '../../bench/longpoll.ts';
import { benchIngest } from '../../bench/smtp.ts';

const quick = { quick: true, runs: 1 };
const lines: string[] = [];
const log = (s: string) => lines.push(s);
let svc: ServiceProcess;

before(async () => {
  svc = await startService(); // benchmark 4's measurement: spawn → first healthy /api/v1/health
});
after(async () => {
  await svc?.stop();
  if (process.env.BENCH_SMOKE_VERBOSE) console.log(lines.join('\n'));
});

test('start-up and idle: time to healthy and RSS are measured', () => {
  assert.ok(svc.startMs > 0 && Number.isFinite(svc.startMs));
  assert.ok(rssOf(svc.pid).rssMb > 10);
});

test('SMTP ingest: every message of each size is acknowledged and counted', async () => {
  const results = await benchIngest({ ...quick, cases: ['text'] }, log, svc);
  assert.equal(results.length, 1);
  for (const r of results) {
    assert.equal(r.failed, 0, r.name);
    assert.ok(r.msgsPerSec.median > 0 && r.p99.median >= r.p50.median);
  }
});

test('API reads: the list and get routes and the bare ceiling answer under autocannon', async () => {
  const results = await benchApi(quick, log, svc);
  assert.equal(results.length, 2);
  for (const r of results) {
    assert.equal(r.errors, 0, r.name);
    assert.ok(r.rps.median > 0 && r.bareRps.median > 0 && r.ratio > 0);
  }
});

test('long-poll fan-out: every held wait is woken by its mail', async () => {
  const r = await benchLongPoll(quick, log, svc);
  assert.equal(r.failed, 0);
  assert.ok(Number.isFinite(r.p50.median));
  assert.ok(Number.isFinite(r.max.median) && r.heldRssMb.median > 0);
});

test('push: every message reaches the webhook and the stream; delays and RSS come out as numbers', async () => {
  const { benchPush } = await import('../../bench/push.ts');
  const res = await benchPush(quick);
  assert.equal(res.missing, 0, 'each message got a webhook call and a stream event');
  for (const s of [res.webhookP50, res.webhookP99, res.streamP50, res.streamP99, res.waitP50]) assert.ok(Number.isFinite(s.median) && s.median >= 0);
  assert.ok(res.streamsRssMb.median > 10);
});

test('two builds in one run: each ingest size is measured for both and compared', () => {
  // this checkout against itself: the harness, not a difference, is what is checked
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/compare.ts', `--base=${ROOT}`, '--quick', 'ingest'], { cwd: ROOT, encoding: 'utf8', timeout: 240_000 });
  assert.equal(r.status, 0, r.stderr);
  const rows = r.stdout.split('\n').filter((l) => /^\s+\d+ (KB|MB) /.test(l));
  assert.equal(rows.length, 3, r.stdout);
  for (const row of rows) assert.match(row, /base \d+ .*\| this \d+ .*this\/base \d+\.\d\d$/, row);
});
