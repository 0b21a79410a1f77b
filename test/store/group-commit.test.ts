// Group commit (store/sqlite/group-commit.ts) on its own, on a real SQLite file (writer thread) and in
// memory (main thread): a write settles only once committed, a failing write fails alone, writes keep
// their order, a burst larger than one batch all commits, and close() drains what is queued. Each test
// asserts which path committed its writes (GroupCommit.stats()): the file variant waits for the writer
// thread to be up first, so its writes really go through the thread.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import { groupCommit, LAZY_MS } from '../../src/store/sqlite/group-commit.ts';
import { migrationSql } from '../../src/store/sqlite/migrations.ts';
import { until } from '../helpers/time.ts';

const dir = mkdtempSync(join(tmpdir(), 'ephemail-gc-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A migrated database and its group commit; with a file, resolves once the writer thread is up. */
async function open(kind: 'file' | 'memory') {
  const path = kind === 'file' ? join(dir, `gc-${n++}.db`) : ':memory:';
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.transaction(() => {
    for (const m of migrationSql()) db.exec(m);
  })();
  const writes = groupCommit(db, kind === 'file' ? path : null);
  // the first write starts the thread (and commits here, as every write does until the thread is up);
  // a sweep of nothing changes no row
  await writes.write({ kind: 'sweep', now: 0, limit: 1 });
  if (kind === 'file') await until(() => writes.stats().threadReady, 'the writer thread is up');
  const before = writes.stats();
  /** Asserts the writes since open() committed on this variant's path: the thread, or this thread. */
  const assertPath = () => {
    const s = writes.stats();
    if (kind === 'file') assert.ok(s.threadBatches > before.threadBatches, `committed on the writer thread: ${JSON.stringify(s)}`);
    else assert.deepEqual([s.threadBatches, s.threadReady, s.localBatches > before.localBatches], [0, false, true], `committed on the main thread: ${JSON.stringify(s)}`);
  };
  return { db, path, writes, assertPath };
}

const HOUR = 3_600_000;
let seq = 0;
/** One message with one recipient row (SQL.insertMessage / insertEmail parameters). */
function add(id = `0190d5b0-0000-7000-8000-${String(++seq).padStart(12, '0')}`) {
  const now = Date.now();
  return {
    id,
    job: {
      kind: 'add' as const,
      messages: [[id, Buffer.from(`Subject: ${id}\r\n\r\nbody\r\n`), now + HOUR] as [string, Uint8Array, number]],
      emails: [[id, 'gc@ephemail.test', id, 's@example.org', null, id, 0, now, now + HOUR]],
    },
  };
}

for (const kind of ['file', 'memory'] as const) {
  describe(`group commit (${kind === 'file' ? 'file: writer thread' : 'memory: main thread'})`, () => {
    test('writes issued together all commit; each is visible to another connection when it settles', async () => {
      const { db, path, writes, assertPath } = await open(kind);
      const reader = kind === 'file' ? new Database(path, { readonly: true }) : db;
      try {
        const jobs = Array.from({ length: 50 }, () => add());
        const seen = await Promise.all(jobs.map(async ({ id, job }) => {
          await writes.write(job);
          return reader.prepare('SELECT count(*) FROM emails WHERE id = ?').pluck().get(id);
        }));
        assert.deepEqual(seen, jobs.map(() => 1), 'every write was committed when its promise resolved');
        assertPath();
        if (kind === 'file') assert.equal(writes.stats().localBatches, 1, 'only the warm-up write committed on the main thread');
      } finally {
        await writes.close();
        if (reader !== db) reader.close();
        db.close();
      }
    });

    test('a failing write fails alone: the others of its batch commit', async () => {
      const { db, writes, assertPath } = await open(kind);
      try {
        const first = add();
        await writes.write(first.job);
        const before = add();
        const after = add();
        const results = await Promise.allSettled([writes.write(before.job), writes.write(first.job), writes.write(after.job)]);
        assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
        const reason = (results[1] as PromiseRejectedResult).reason;
        assert.ok(reason instanceof Error && /UNIQUE|constraint/i.test(reason.message), String(reason));
        const ids = db.prepare('SELECT id FROM emails ORDER BY id').pluck().all();
        assert.deepEqual(ids, [first.id, before.id, after.id].sort(), 'no half-written duplicate, both neighbours stored');
        assertPath();
      } finally {
        await writes.close();
        db.close();
      }
    });

    test('writes keep their order: views written right after their message, in the same turn, land', async () => {
      const { db, writes, assertPath } = await open(kind);
      try {
        const m = add();
        const [added, viewed, missing] = await Promise.all([
          writes.write(m.job),
          writes.write({ kind: 'views', key: m.id, views: '{"v":1}', parts: [Buffer.from('part')] }),
          writes.write({ kind: 'views', key: 'no-such-message', views: '{}', parts: [] }),
        ]);
        assert.deepEqual([added, viewed, missing], [0, 1, 0], 'the views found their message; a freed one writes nothing');
        assert.equal(db.prepare('SELECT views FROM messages WHERE key = ?').pluck().get(m.id), '{"v":1}');
        assert.equal(db.prepare('SELECT count(*) FROM message_parts WHERE message_key = ?').pluck().get(m.id), 1);
        assertPath();
      } finally {
        await writes.close();
        db.close();
      }
    });

    test('a burst larger than one batch (512) all commits; close() drains the queue, then refuses', async () => {
      const { db, writes, assertPath } = await open(kind);
      const jobs = Array.from({ length: 1200 }, () => add());
      const pending = jobs.map(({ job }) => writes.write(job));
      // with the thread: close once a batch has committed there, so close() drains a burst in progress
      if (kind === 'file') await until(() => writes.stats().threadBatches > 0, 'a batch committed on the writer thread');
      const closing = writes.close();
      await Promise.all(pending);
      await closing;
      assert.equal(db.prepare('SELECT count(*) FROM emails').pluck().get(), 1200);
      assertPath();
      db.close();
      await assert.rejects(writes.write(add().job), StoreUnavailableError);
    });
  });
}

describe('lazy writes (verdicts nobody waits on)', () => {
  test('a lazy write rides along with the next batch of other writes: no commit of its own', async () => {
    const { db, writes } = await open('file');
    try {
      const m = add();
      await writes.write(m.job);
      const before = writes.stats().threadBatches;
      let lazyDone = false;
      const lazy = writes.write({ kind: 'auth', key: m.id, verdicts: '{"v":1}' }, { lazy: true }).then((n) => ((lazyDone = true), n));
      const other = add();
      // the next write, a turn later: one batch commits both
      await new Promise((r) => setImmediate(r));
      assert.equal(lazyDone, false, 'not committed alone');
      await writes.write(other.job);
      assert.equal(await lazy, 1);
      assert.equal(writes.stats().threadBatches - before, 1, 'one batch for both');
      assert.equal(db.prepare('SELECT verdicts FROM message_auth WHERE message_key = ?').pluck().get(m.id), '{"v":1}');
    } finally {
      await writes.close();
      db.close();
    }
  });

  test(`a lazy write alone commits within ${LAZY_MS} ms and some; close() commits a waiting one`, async () => {
    const { db, writes } = await open('file');
    try {
      const m = add();
      await writes.write(m.job);
      const t0 = performance.now();
      assert.equal(await writes.write({ kind: 'auth', key: m.id, verdicts: '{"v":2}' }, { lazy: true }), 1);
      // bound: waited for company at most LAZY_MS, then committed alone (one-sided, generous for a loaded machine)
      assert.ok(performance.now() - t0 < LAZY_MS + 2000, `committed after ${Math.round(performance.now() - t0)} ms`);
      const waiting = writes.write({ kind: 'auth', key: m.id, verdicts: '{"v":3}' }, { lazy: true });
      await writes.close();
      assert.equal(await waiting, 1);
      assert.equal(db.prepare('SELECT verdicts FROM message_auth WHERE message_key = ?').pluck().get(m.id), '{"v":3}');
    } finally {
      db.close();
    }
  });
});
