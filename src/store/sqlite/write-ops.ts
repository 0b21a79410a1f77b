// The SQLite store's write operations, run in one transaction per batch (should one fail, the batch
// runs again write by write, each in a transaction of its own: it fails alone, all or none). Used by the writer thread (writer.ts) and by the main thread
// when it commits itself (`:memory:`, or until the thread is up): group-commit.ts.
import type Database from 'better-sqlite3';
import { eventQueue, type EventBodyRow, type EventRefusal, type EventRow } from './event-queue.ts';

/** One write: it fails alone, all or none (see makeOps: one transaction per batch, write by write after a failure). */
export type WriteJob =
  /**
   * New mail: each message once ([key, raw, expiresAt, search text if any]), then its rows
   * (SQL.insertEmail parameters). A raw message that owns its buffer is moved to the writer
   * thread: do not use it after.
   */
  | { kind: 'add'; messages: [string, Uint8Array, number, (string | null)?, (string | null)?][]; emails: unknown[][]; events?: AddEvents }
  /** The authentication verdicts of a message; 0 when it is gone. */
  | { kind: 'auth'; key: string; verdicts: string }
  /** The search text of a message that has none; 0 when it has one or is gone. */
  | { kind: 'search'; key: string; text: string }
  /** Derived views of a message and its decoded parts; 0 when the message was already freed. */
  | { kind: 'views'; key: string; views: string; parts: Uint8Array[] }
  /** Up to `limit` expired rows (and expired messages); returns how many rows. */
  | { kind: 'sweep'; now: number; limit: number };

/**
 * New mail's webhook events, queued in the mail's own transaction (store/webhooks.ts MailEvents): jobs
 * as [id, webhookId, keyHash, emailId, dueAt, expiresAt], bodies as [emailId, payload, expiresAt], and
 * the caps [perKey, perHook].
 */
export interface AddEvents {
  jobs: EventRow[];
  bodies: EventBodyRow[];
  caps: [number, number];
}

/** A job a cap refused: its position in AddEvents.jobs and why. */
export type Refusal = [number, EventRefusal];

/** A write's outcome: its count (and, for new mail, the events refused), or the error that rolled it back. */
export type Outcome = { value: number; refused?: Refusal[] } | { error: { message: string; code?: string } };

/** Runs writes in one transaction; throws only when the whole transaction failed (rolled back). */
export type Batch = (jobs: WriteJob[]) => Outcome[];

/** An error as it crosses to another thread: its message and SQLite's code. */
export function errorOf(e: unknown): { message: string; code?: string } {
  const err = e as { message?: unknown; code?: unknown } | null;
  return { message: String((err && err.message) || e), code: err && typeof err.code === 'string' ? err.code : undefined };
}

/** The batch runner of a connection: every statement of `sql` prepared once on it. */
export function makeOps(db: Database.Database, sql: Readonly<Record<string, string>>): Batch {
  const st: Record<string, Database.Statement> = {};
  for (const k of Object.keys(sql)) st[k] = db.prepare(sql[k]);
  // prepared on first use: a writer that never sees a webhook event never prepares them
  let queue: ReturnType<typeof eventQueue> | null = null;
  const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  /** Queues the events of new mail under the caps, in the current transaction; returns the refused. */
  const queueEvents = (e: AddEvents): Refusal[] => {
    const refused: Refusal[] = [];
    (queue ??= eventQueue(db))(e.jobs, e.bodies, { perKey: e.caps[0], perHook: e.caps[1] }, (pos, why) => void refused.push([pos, why]));
    return refused;
  };
  let refused: Refusal[] | undefined;
  const run: { [K in WriteJob['kind']]: (j: Extract<WriteJob, { kind: K }>) => number } = {
    add(j) {
      for (const m of j.messages) {
        st.insertMessage.run(m[0], buf(m[1]), m[2]);
        if (m[3] != null) st.insertSearch.run(m[0], Buffer.from(m[3], 'utf8'), m[0]);
        if (m[4] != null) st.insertAuth.run(m[0], m[4]);
      }
      for (const e of j.emails) st.insertEmail.run(...e);
      // the mail's webhook events in the same transaction: both commit or neither
      if (j.events) refused = queueEvents(j.events);
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
  const runJob = (j: WriteJob): Outcome => {
    refused = undefined;
    const value = (run[j.kind] as (j: WriteJob) => number)(j);
    return refused ? { value, refused } : { value };
  };
  // One transaction for the whole batch, without a savepoint per job (each savepoint made SQLite
  // write a statement journal: ~52 KB of temp file per message). When one job fails the batch is
  // rolled back and run again job by job, each in a transaction of its own, so a failing job still
  // fails alone and the others commit (docs/architecture.md "A message, from socket to row to GET").
  const all = db.transaction((jobs: WriteJob[]) => jobs.map(runJob));
  const alone = db.transaction(runJob);
  return (jobs: WriteJob[]): Outcome[] => {
    try {
      return all(jobs);
    } catch (e) {
      if (jobs.length === 1) return [{ error: errorOf(e) }];
      return jobs.map((j): Outcome => {
        try {
          return alone(j);
        } catch (err) {
          return { error: errorOf(err) };
        }
      });
    }
  };
}
