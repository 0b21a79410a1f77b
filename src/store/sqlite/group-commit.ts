// Group commit for the SQLite store: writes arriving together (new mail, derived views, sweep
// batches) share one transaction and one fsync, on a writer thread with its own connection; every
// write settles only after its COMMIT. The main thread keeps reading.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { typedStoreError } from './errors.ts';
import { SQL } from './migrations.ts';

// Captured at load: a test's fake timers must not stall durable writes.
const nextTurn = globalThis.setImmediate;
const later = globalThis.setTimeout;
const cancel = globalThis.clearTimeout;
/**
 * A lazy write (one nobody waits on: verdicts computed in the background) commits with the next
 * batch of other writes, or after this long, or once this many wait: it never costs a commit and
 * an fsync of its own while mail is arriving, and so never delays a 250.
 */
export const LAZY_MS = 200;
const LAZY_MAX = 256;
const MAX_BATCH = 512;
/** The WAL is cut back to this size after a checkpoint (SQLite keeps it at its largest otherwise). */
const WAL_LIMIT = 16 * 1024 * 1024;
/** A batch writing this many bytes is checkpointed right after it commits. */
const BIG_WRITE = 4 * 1024 * 1024;

/** One write. Each runs in its own savepoint of the shared transaction: it fails alone, all or none. */
export type WriteJob =
  /**
   * New mail: each message once ([key, raw, expiresAt, search text if any]), then its rows
   * (SQL.insertEmail parameters). A raw message over 64 KiB that owns its buffer is moved to the
   * writer thread: do not use it after.
   */
  | { kind: 'add'; messages: [string, Uint8Array, number, (string | null)?, (string | null)?][]; emails: unknown[][] }
  /** The authentication verdicts of a message; 0 when it is gone. */
  | { kind: 'auth'; key: string; verdicts: string }
  /** The search text of a message that has none; 0 when it has one or is gone. */
  | { kind: 'search'; key: string; text: string }
  /** Derived views of a message and its decoded parts; 0 when the message was already freed. */
  | { kind: 'views'; key: string; views: string; parts: Uint8Array[] }
  /** Up to `limit` expired rows (and expired messages); returns how many rows. */
  | { kind: 'sweep'; now: number; limit: number };

// The operations, as plain JavaScript source: the writer thread evaluates it (nothing to compile),
// and so does the main thread when it commits itself (`:memory:`, or until the thread is up).
const OPS = `
function makeOps(db, SQL) {
  const st = {};
  for (const k of Object.keys(SQL)) st[k] = db.prepare(SQL[k]);
  const buf = (u) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  const run = {
    add(j) {
      for (const m of j.messages) {
        st.insertMessage.run(m[0], buf(m[1]), m[2]);
        if (m[3] != null) st.insertSearch.run(m[0], Buffer.from(m[3], 'utf8'), m[0]);
        if (m[4] != null) st.insertAuth.run(m[0], m[4]);
      }
      for (const e of j.emails) st.insertEmail.run(...e);
      return 0;
    },
    views(j) {
      st.clearParts.run(j.key);
      const n = st.setViews.run(j.views, j.key).changes;
      if (n) j.parts.forEach((p, i) => st.insertPart.run(j.key, i, buf(p), j.key));
      return n;
    },
    auth(j) {
      return st.setAuth.run(j.key, j.verdicts, j.key).changes;
    },
    search(j) {
      return st.insertSearch.run(j.key, Buffer.from(j.text, 'utf8'), j.key).changes;
    },
    sweep(j) {
      const n = st.sweepEmails.run(j.now, j.limit).changes;
      st.sweepMessages.run(j.now, j.limit);
      return n;
    },
  };
  const one = db.transaction((j) => run[j.kind](j));
  const errorOf = (e) => ({ message: String((e && e.message) || e), code: e && e.code });
  return db.transaction((jobs) => jobs.map((j) => {
    try { return { value: one(j) }; } catch (e) { if (!db.inTransaction) throw e; return { error: errorOf(e) }; }
  }));
}
`;

type Outcome = { value: number } | { error: { message: string; code?: string } };
type Batch = (jobs: WriteJob[]) => Outcome[];

/** The batch runner on a connection of this thread. */
export const localBatch = (db: Database.Database): Batch =>
  new Function('db', 'SQL', `${OPS}\nreturn makeOps(db, SQL);`)(db, SQL) as Batch;

const WRITER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
db.pragma('journal_size_limit = ${WAL_LIMIT}');
${OPS}
const batch = makeOps(db, workerData.sql);
parentPort.on('message', (m) => {
  if (m.close) {
    db.close();
    parentPort.close();
    return;
  }
  let outcomes;
  try { outcomes = batch(m.jobs); }
  catch (e) { parentPort.postMessage({ seq: m.seq, failed: { message: String((e && e.message) || e), code: e && e.code } }); return; }
  parentPort.postMessage({ seq: m.seq, outcomes });
  // after a large write, move the WAL into the database now (so a big message is not held twice,
  // in the WAL and the file, until the next automatic checkpoint); the WAL is then cut back
  if (m.bytes > ${BIG_WRITE}) { try { db.pragma('wal_checkpoint(TRUNCATE)'); } catch {} }
});
parentPort.postMessage({ ready: true });
`;

const asError = (e: { message: string; code?: string }) => Object.assign(new Error(e.message), e.code ? { code: e.code } : {});

export interface GroupCommit {
  /**
   * Runs one write; resolves with its count once committed. `lazy`: it may wait up to LAZY_MS for
   * another write to share a commit with (and commit after writes made meanwhile).
   */
  write(job: WriteJob, options?: { lazy?: boolean }): Promise<number>;
  /** Resolves once no write is in flight, and stops the thread. */
  close(): Promise<void>;
  /** Which path committed: batches committed on the writer thread and on this thread; whether the thread is up. */
  stats(): GroupCommitStats;
}

export interface GroupCommitStats { threadBatches: number; localBatches: number; threadReady: boolean }

/**
 * Group commit: writes share one transaction (one fsync instead of one each), each in its own
 * savepoint so a failing one fails alone. Every promise settles only after the shared COMMIT, so a
 * 250 still means durable. Writes keep their order (batches commit one after another).
 * With a file database the commits run on a writer thread with its own connection while the next
 * batch gathers; until that thread is up (and for `:memory:`) they run here, one turn of the event
 * loop per batch.
 */
export function groupCommit(db: Database.Database, path: string | null): GroupCommit {
  interface Pending { job: WriteJob; resolve: (n: number) => void; reject: (e: unknown) => void }
  let queue: Pending[] = [];
  /** Lazy writes waiting for another batch (or their timer) to commit with. */
  let deferred: Pending[] = [];
  let lazyTimer: ReturnType<typeof setTimeout> | null = null;
  /** Lazy writes join the queue: they commit in the next batch. */
  const takeDeferred = () => {
    if (lazyTimer) cancel(lazyTimer);
    lazyTimer = null;
    if (deferred.length === 0) return;
    queue = queue.length ? queue.concat(deferred) : deferred;
    deferred = [];
  };
  let scheduled = false;
  let local: Batch | null = null;
  const unavailable = (err: unknown) => typedStoreError(err, db.open);

  let writer: Worker | null = null;
  let writerReady = false;
  let writerDead = !path;
  let inFlight: { seq: number; jobs: Pending[] } | null = null;
  let seq = 0;
  let idle: (() => void)[] = [];
  const committed = { thread: 0, local: 0 };
  const settleIdle = () => {
    if (inFlight || queue.length || deferred.length) return;
    for (const f of idle) f();
    idle = [];
  };
  const finish = (jobs: Pending[], outcomes: Outcome[] | null, failed: unknown) => {
    jobs.forEach((p, i) => {
      const o = outcomes?.[i];
      if (!o) p.reject(failed);
      else if ('error' in o) p.reject(unavailable(asError(o.error)));
      else p.resolve(o.value);
    });
  };

  const startWriter = () => {
    if (writer || writerDead || !path) return;
    try {
      const w = new Worker(WRITER, {
        eval: true,
        workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), path, sql: SQL },
      });
      writer = w;
      w.unref();
      w.on('message', (m: { ready?: true; seq?: number; outcomes?: Outcome[]; failed?: { message: string; code?: string } }) => {
        if (m.ready) {
          writerReady = true;
          return;
        }
        const batch = inFlight;
        if (!batch || batch.seq !== m.seq) return;
        inFlight = null;
        if (m.outcomes) committed.thread++;
        finish(batch.jobs, m.outcomes ?? null, m.failed ? unavailable(asError(m.failed)) : null);
        if (queue.length) flush();
        else settleIdle();
      });
      const down = (err: unknown) => {
        if (writer !== w) return;
        writer = null;
        writerDead = true; // commit here from now on
        const batch = inFlight;
        inFlight = null;
        // not known to be committed: a temporary failure, the sender retries
        finish(batch?.jobs ?? [], null, new StoreUnavailableError('the SQLite writer thread stopped', { cause: err }));
        if (queue.length) schedule();
        else settleIdle();
      };
      w.on('error', down);
      w.on('exit', (code) => down(new Error(`writer thread exited with code ${code}`)));
    } catch {
      writerDead = true;
    }
  };

  const flush = () => {
    scheduled = false;
    if (inFlight) return; // the reply of the batch in flight flushes again
    if (queue.length) takeDeferred(); // lazy writes ride along with others
    const jobs = queue.length > MAX_BATCH ? queue.splice(0, MAX_BATCH) : queue;
    queue = jobs === queue ? [] : queue;
    if (jobs.length === 0) return settleIdle();
    if (writer && writerReady && !writerDead && db.open) {
      inFlight = { seq: ++seq, jobs };
      let bytes = 0;
      // a message's bytes that own their buffer move to the writer (no copy: the caller is done
      // with them once they are handed to the store); others are copied once, however many rows
      const transfer = new Set<ArrayBuffer>();
      for (const p of jobs) {
        if (p.job.kind === 'add') {
          for (const m of p.job.messages) {
            bytes += m[1].byteLength;
            const b = m[1].buffer;
            if (b instanceof ArrayBuffer && m[1].byteOffset === 0 && m[1].byteLength === b.byteLength && b.byteLength > 64 * 1024) transfer.add(b);
          }
        } else if (p.job.kind === 'views') for (const part of p.job.parts) bytes += part.byteLength;
      }
      writer.postMessage({ seq, jobs: jobs.map((p) => p.job), bytes }, [...transfer]);
      return;
    }
    if (queue.length > 0) schedule();
    let outcomes: Outcome[] | null = null;
    let failed: unknown = null;
    try {
      if (!db.open) throw new StoreUnavailableError('the SQLite database is closed');
      local ??= localBatch(db);
      outcomes = local(jobs.map((p) => p.job));
      committed.local++;
    } catch (err) {
      failed = unavailable(err); // SQLite rolled back the whole batch (disk full, I/O error)
    }
    finish(jobs, outcomes, failed);
    settleIdle();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    nextTurn(flush);
  };
  /** Lazy writes waited long enough (or are many): they commit in a batch of their own. */
  const commitDeferred = () => {
    takeDeferred(); // (also stops the timer)
    if (!inFlight) schedule();
  };
  return {
    stats: () => ({ threadBatches: committed.thread, localBatches: committed.local, threadReady: writerReady && !writerDead && writer !== null }),
    write: (job, options) =>
      new Promise<number>((resolve, reject) => {
        if (!db.open) return reject(new StoreUnavailableError('the SQLite database is closed'));
        startWriter();
        if (options?.lazy && !writerDead) {
          deferred.push({ job, resolve, reject });
          if (deferred.length >= LAZY_MAX) commitDeferred();
          else lazyTimer ??= later(commitDeferred, LAZY_MS);
          return;
        }
        queue.push({ job, resolve, reject });
        if (!inFlight) schedule();
      }),
    close: () => {
      writerDead = true; // closing: what is queued now commits here, the thread stops
      takeDeferred();
      return new Promise<void>((resolve) => {
        idle.push(() => {
          const w = writer;
          writer = null;
          if (!w) return resolve();
          // the thread closes its connection and ends; terminated if it does not within a second
          const t = setTimeout(() => void w.terminate(), 1000);
          w.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          w.postMessage({ close: true });
        });
        if (!inFlight && queue.length) flush();
        settleIdle();
      });
    },
  };
}
