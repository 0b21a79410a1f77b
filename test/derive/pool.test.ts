// The worker pool's lanes start their workers on first use and stop them once idle (an idle service
// holds no derivation threads); a task after the stop starts one again and is answered.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BudgetExceededError, createLane, IDLE_STOP_MS } from '../../src/derive/pool.ts';
import { until } from '../helpers/time.ts';

const LIMITS = { maxAttachmentBytes: 1024 * 1024, maxAttachments: 10 };
const mail = () => new TextEncoder().encode('From: a@example.org\r\nSubject: hello\r\n\r\nbody text\r\n');

test('a lane starts no worker before its first task, stops its workers when idle, and starts one again for the next task', async () => {
  // the default (docs/architecture.md "Memory"): 10 s; here shortened, the behaviour is the same
  assert.equal(IDLE_STOP_MS, 10_000);
  const lane = createLane({ name: 'test', workers: 1, idleStopMs: 300 });
  try {
    assert.equal(lane.size, 0, 'nothing started before the first task');
    lane.warm(); // as the first read does
    assert.equal(lane.size, 1);
    await until(() => lane.size === 0, 'the idle worker is stopped', 10_000, 20);
    const summary = await lane.run('summarize', mail(), LIMITS, { budgetMs: 10_000 });
    assert.equal(summary.subject, 'hello', 'a task after the stop is answered');
    assert.equal(lane.size, 1, 'on a worker started again');
    await until(() => lane.size === 0, 'stopped again once idle', 10_000, 20);
  } finally {
    await lane.close();
  }
});

test('a task that runs its worker out of memory fails as over its budget (the caller falls back), and the lane goes on', async () => {
  const lane = createLane({ name: 'test', workers: 1, oldGenerationMb: 16 });
  try {
    // 24 MB of HTML: its parse and sanitizing need far more than a 16 MB old generation
    const html = `<html><body>${'<p class="x">many <b>words</b> in <i>markup</i></p>'.repeat(500_000)}</body></html>`;
    const big = new TextEncoder().encode(`From: a@example.org\r\nSubject: big\r\nContent-Type: text/html; charset=utf-8\r\n\r\n${html}\r\n`);
    await assert.rejects(lane.run('derive', big, LIMITS, { budgetMs: 60_000, keepRaw: true, options: { html: true } }), BudgetExceededError);
    const summary = await lane.run('summarize', mail(), LIMITS, { budgetMs: 10_000 });
    assert.equal(summary.subject, 'hello', 'the next task runs on a fresh worker');
  } finally {
    await lane.close();
  }
});
