// Group commit for the SQLite store: addEmails calls arriving together share one transaction and one
// fsync, on a writer thread with its own connection; every call settles only after its COMMIT.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../domain/errors.ts';
import type { EmailSummary, NewEmail } from '../store.ts';
import { INSERT_ATTACHMENT, INSERT_EMAIL } from './migrations.ts';

// Captured at load: a test's fake timers must not stall durable writes.
const nextTurn = globalThis.setImmediate;
const MAX_BATCH = 512;
export const toBuffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** One email's insert parameters: the emails row and its attachments rows. */
export interface EmailRows {
  email: Record<string, unknown>;
  attachments: [string, string, number, string, string, number, Uint8Array][];
}

/** Per database: resolves once no commit is in flight (close() waits for it). */
export const commitsDone = new WeakMap<Database.Database, () => Promise<void>>();

// The commit thread: its own connection, inserting batches of rows and committing them, so the
// fsync of synchronous=FULL blocks it and not the event loop. Plain JavaScript: nothing to compile.
const WRITER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
const insertEmail = db.prepare(workerData.insertEmail);
const insertAttachment = db.prepare(workerData.insertAttachment);
const one = db.transaction((rows) => {
  for (const r of rows) {
    insertEmail.run(r.email);
    for (const a of r.attachments) insertAttachment.run(a[0], a[1], a[2], a[3], a[4], a[5], Buffer.from(a[6].buffer, a[6].byteOffset, a[6].byteLength));
  }
});
const errorOf = (e) => ({ message: String(e && e.message || e), code: e && e.code });
const batch = db.transaction((calls) => calls.map((rows) => {
  try { one(rows); return null; } catch (e) { if (!db.inTransaction) throw e; return errorOf(e); }
}));
parentPort.on('message', (m) => {
  if (m.close) {
    db.close();
    parentPort.close();
    return;
  }
  try { parentPort.postMessage({ seq: m.seq, errors: batch(m.calls) }); }
  catch (e) { parentPort.postMessage({ seq: m.seq, failed: errorOf(e) }); }
});
parentPort.postMessage({ ready: true });
`;

const asError = (e: { message: string; code?: string }) => Object.assign(new Error(e.message), e.code ? { code: e.code } : {});

/**
 * Group commit: addEmails calls share one transaction (one fsync instead of one each), each call in
 * its own savepoint so a failing call fails alone and stays all-or-none. Every promise settles only
 * after the shared COMMIT returned, so a 250 still means durable. Calls keep their order, and so do
 * their ids (assigned here, in call order; batches commit one after another).
 * With a file database the commits run on a writer thread with its own connection, while the next
 * batch gathers; until that thread is up (and for `:memory:`) they run here, one turn of the event
 * loop per batch.
 */
export function groupCommit(
  db: Database.Database,
  add: (emails: NewEmail[]) => EmailSummary[],
  file: { path: string; toRows: (emails: NewEmail[]) => { rows: EmailRows[]; summaries: EmailSummary[] } } | null,
  /** Called for every call's emails once its fate is known (committed, failed or unknown), before it settles. */
  changed: (emails: NewEmail[]) => void,
): (emails: NewEmail[]) => Promise<EmailSummary[]> {
  interface Job { emails: NewEmail[]; resolve: (s: EmailSummary[]) => void; reject: (e: unknown) => void }
  type Outcome = { ok: true; value: EmailSummary[] } | { ok: false; err: unknown };
  let queue: Job[] = [];
  let scheduled = false;
  const unavailable = (err: unknown) => (db.open ? err : new StoreUnavailableError('the SQLite database is closed', { cause: err }));

  // ---- the writer thread (file databases), started on the first write ----
  let writer: Worker | null = null;
  let writerReady = false;
  let writerDead = !file;
  let inFlight: { seq: number; jobs: Job[]; summaries: EmailSummary[][] } | null = null;
  let seq = 0;
  let idle: (() => void)[] = [];
  const settleIdle = () => {
    if (inFlight || queue.length) return;
    for (const f of idle) f();
    idle = [];
  };
  commitsDone.set(db, () => {
    writerDead = true; // closing: what is queued now commits here, the thread stops
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
  });
  const startWriter = () => {
    if (writer || writerDead || !file) return;
    try {
      const w = new Worker(WRITER, {
        eval: true,
        workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), path: file.path, insertEmail: INSERT_EMAIL, insertAttachment: INSERT_ATTACHMENT },
      });
      writer = w;
      w.unref();
      w.on('message', (m: { ready?: true; seq?: number; errors?: ({ message: string; code?: string } | null)[]; failed?: { message: string; code?: string } }) => {
        if (m.ready) {
          writerReady = true;
          return;
        }
        const batch = inFlight;
        if (!batch || batch.seq !== m.seq) return;
        inFlight = null;
        batch.jobs.forEach((job, i) => {
          changed(job.emails);
          const e = m.failed ?? m.errors?.[i];
          if (e) job.reject(asError(e));
          else job.resolve(batch.summaries[i]);
        });
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
        for (const job of batch?.jobs ?? []) changed(job.emails);
        for (const job of batch?.jobs ?? []) job.reject(new StoreUnavailableError('the SQLite writer thread stopped', { cause: err }));
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
    const jobs = queue.length > MAX_BATCH ? queue.splice(0, MAX_BATCH) : queue;
    queue = jobs === queue ? [] : queue;
    if (jobs.length === 0) return settleIdle();
    if (writer && writerReady && !writerDead && db.open) {
      const calls: EmailRows[][] = [];
      const summaries: EmailSummary[][] = [];
      for (const job of jobs) {
        const r = file!.toRows(job.emails);
        calls.push(r.rows);
        summaries.push(r.summaries);
      }
      inFlight = { seq: ++seq, jobs, summaries };
      writer.postMessage({ seq, calls });
      return;
    }
    if (queue.length > 0) schedule();
    const outcomes: Outcome[] = [];
    try {
      db.transaction(() => {
        for (const job of jobs) {
          try {
            outcomes.push({ ok: true, value: add(job.emails) }); // nested: runs in a savepoint
          } catch (err) {
            if (!db.inTransaction) throw err; // SQLite rolled back the whole batch (disk full, I/O error)
            outcomes.push({ ok: false, err });
          }
        }
      })();
    } catch (err) {
      for (const job of jobs) changed(job.emails);
      for (const job of jobs) job.reject(unavailable(err));
      return settleIdle();
    }
    jobs.forEach((job, i) => {
      changed(job.emails);
      const o = outcomes[i];
      if (o.ok) job.resolve(o.value);
      else job.reject(unavailable(o.err));
    });
    settleIdle();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    nextTurn(flush);
  };
  return (emails) =>
    new Promise<EmailSummary[]>((resolve, reject) => {
      if (!db.open) return reject(new StoreUnavailableError('the SQLite database is closed'));
      startWriter();
      queue.push({ emails, resolve, reject });
      if (!inFlight) schedule();
    });
}
