// Group commit for the SQLite store: writes arriving together (new mail, derived views, sweep
// batches) share one transaction and one fsync, on a writer thread with its own connection; every
// write settles only after its COMMIT. The main thread keeps reading.
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { typedStoreError } from './errors.ts';
import { SQL } from './migrations.ts';
import { makeOps, type Batch, type Outcome, type Refusal, type WriteJob } from './write-ops.ts';

export type { WriteJob } from './write-ops.ts';
import type { WriterData, WriterMessage, WriterReply } from './writer.ts';
import { workerEntry } from '../../worker-entry.ts';

/**
 * A lazy write (one nobody waits on: verdicts computed in the background) commits with the next
 * batch of other writes, or after this long, or once this many wait: it never costs a commit and
 * an fsync of its own while mail is arriving, and so never delays a 250.
 */
export const LAZY_MS = 200;
const LAZY_MAX = 256;
const MAX_BATCH = 512;
/** A batch writing this many bytes is checkpointed right after it commits. */
const BIG_WRITE = 4 * 1024 * 1024;

declare const EPHEMAIL_WRITER_ENTRY: string | undefined;

/** The batch runner on a connection of this thread. */
export const localBatch = (db: Database.Database): Batch => makeOps(db, SQL);

const asError = (e: { message: string; code?: string }) => Object.assign(new Error(e.message), e.code ? { code: e.code } : {});

export interface GroupCommit {
  /**
   * Runs one write; resolves with its count once committed. `lazy`: it may wait up to LAZY_MS for
   * another write to share a commit with (and commit after writes made meanwhile).
   */
  write(job: WriteJob, options?: { lazy?: boolean }): Promise<number>;
  /** Writes new mail (with its webhook events, if any); resolves once committed with the events a cap refused. */
  writeMail(job: Extract<WriteJob, { kind: 'add' }>): Promise<Refusal[]>;
  /** Resolves once no write is in flight, and stops the thread. */
  close(): Promise<void>;
  /** Which path committed: batches committed on the writer thread and on this thread; whether the thread is up. */
  stats(): GroupCommitStats;
}

export interface GroupCommitStats { threadBatches: number; localBatches: number; threadReady: boolean }

/**
 * Group commit: writes share one transaction (one fsync instead of one each); should one fail, the
 * batch runs again write by write, so a failing one fails alone. Every promise settles only after the shared COMMIT, so a
 * 250 still means durable. Writes keep their order (batches commit one after another).
 * With a file database the commits run on a writer thread with its own connection while the next
 * batch gathers; until that thread is up (and for `:memory:`) they run here, one turn of the event
 * loop per batch.
 */
export function groupCommit(db: Database.Database, path: string | null): GroupCommit {
  interface Pending { job: WriteJob; resolve: (o: { value: number; refused?: Refusal[] }) => void; reject: (e: unknown) => void }
  let queue: Pending[] = [];
  /** Lazy writes waiting for another batch (or their timer) to commit with. */
  let deferred: Pending[] = [];
  let lazyTimer: ReturnType<typeof setTimeout> | null = null;
  /** Lazy writes join the queue: they commit in the next batch. */
  const takeDeferred = () => {
    if (lazyTimer) clearTimeout(lazyTimer);
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
      else p.resolve(o);
    });
  };

  const startWriter = () => {
    if (writer || writerDead || !path) return;
    try {
      const entry = workerEntry(typeof EPHEMAIL_WRITER_ENTRY === 'string' ? EPHEMAIL_WRITER_ENTRY : undefined, new URL('./writer.ts', import.meta.url), 'sqlite-writer');
      const workerData: WriterData = { path, sql: SQL, bigWrite: BIG_WRITE };
      // (its young generation capped like the derivation workers': docs/architecture.md "Memory")
      const w = new Worker(entry.url, { execArgv: entry.execArgv, workerData, resourceLimits: { maxYoungGenerationSizeMb: 8 } });
      writer = w;
      w.unref();
      w.on('message', (m: WriterReply) => {
        if ('ready' in m) {
          writerReady = true;
          return;
        }
        const batch = inFlight;
        if (!batch || batch.seq !== m.seq) return;
        inFlight = null;
        if ('outcomes' in m) committed.thread++;
        finish(batch.jobs, 'outcomes' in m ? m.outcomes : null, 'failed' in m ? unavailable(asError(m.failed)) : null);
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
      // a message's bytes that own their buffer move to the writer, whatever their size (no copy:
      // the caller is done with them once they are handed to the store, and nothing of them then
      // waits on this thread for a collection); others are copied once, however many rows
      const transfer = new Set<ArrayBuffer>();
      for (const p of jobs) {
        if (p.job.kind === 'add') {
          for (const m of p.job.messages) {
            bytes += m[1].byteLength;
            const b = m[1].buffer;
            if (b instanceof ArrayBuffer && m[1].byteOffset === 0 && m[1].byteLength === b.byteLength && b.byteLength > 0) transfer.add(b);
          }
        } else if (p.job.kind === 'views') for (const part of p.job.parts) bytes += part.byteLength;
      }
      const batch: WriterMessage = { seq, jobs: jobs.map((p) => p.job), bytes };
      writer.postMessage(batch, [...transfer]);
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
    setImmediate(flush);
  };
  /** Lazy writes waited long enough (or are many): they commit in a batch of their own. */
  const commitDeferred = () => {
    takeDeferred(); // (also stops the timer)
    if (!inFlight) schedule();
  };
  const write = (job: WriteJob, options?: { lazy?: boolean }) =>
    new Promise<{ value: number; refused?: Refusal[] }>((resolve, reject) => {
      if (!db.open) return reject(new StoreUnavailableError('the SQLite database is closed'));
      startWriter();
      if (options?.lazy && !writerDead) {
        deferred.push({ job, resolve, reject });
        if (deferred.length >= LAZY_MAX) commitDeferred();
        else lazyTimer ??= setTimeout(commitDeferred, LAZY_MS);
        return;
      }
      queue.push({ job, resolve, reject });
      if (!inFlight) schedule();
    });
  return {
    stats: () => ({ threadBatches: committed.thread, localBatches: committed.local, threadReady: writerReady && !writerDead && writer !== null }),
    write: (job, options) => write(job, options).then((o) => o.value),
    writeMail: (job) => write(job).then((o) => o.refused ?? []),
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
          w.postMessage({ close: true } satisfies WriterMessage);
        });
        if (!inFlight && queue.length) flush();
        settleIdle();
      });
    },
  };
}
