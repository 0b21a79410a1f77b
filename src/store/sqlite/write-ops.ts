// The SQLite store's write operations, run in one transaction per batch, each write in a savepoint of
// its own (it fails alone, all or none). Used by the writer thread (writer.ts) and by the main thread
// when it commits itself (`:memory:`, or until the thread is up): group-commit.ts.
import type Database from 'better-sqlite3';

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

/** A write's outcome: its count, or the error that rolled its savepoint back. */
export type Outcome = { value: number } | { error: { message: string; code?: string } };
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
  const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  const run: { [K in WriteJob['kind']]: (j: Extract<WriteJob, { kind: K }>) => number } = {
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
  const runJob = (j: WriteJob) => (run[j.kind] as (j: WriteJob) => number)(j);
  // One transaction for the whole batch, without a savepoint per job (each savepoint made SQLite
  // write a statement journal: ~52 KB of temp file per message). When one job fails the batch is
  // rolled back and run again job by job, each in a transaction of its own, so a failing job still
  // fails alone and the others commit (docs/architecture.md "Ingest").
  const all = db.transaction((jobs: WriteJob[]) => jobs.map((j): Outcome => ({ value: runJob(j) })));
  const alone = db.transaction(runJob);
  return (jobs: WriteJob[]): Outcome[] => {
    try {
      return all(jobs);
    } catch (e) {
      if (jobs.length === 1) return [{ error: errorOf(e) }];
      return jobs.map((j): Outcome => {
        try {
          return { value: alone(j) };
        } catch (err) {
          return { error: errorOf(err) };
        }
      });
    }
  };
}
