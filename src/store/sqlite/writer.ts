// The SQLite writer thread (group-commit.ts starts it): its own connection, the same settings as the
// store's, and the batches the main thread sends, each committed in one transaction (write-ops.ts).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { applyPragmas } from './pragmas.ts';
import { errorOf, makeOps, type Outcome, type WriteJob } from './write-ops.ts';

/** What group-commit.ts gives the thread. */
export interface WriterData {
  path: string;
  sql: Record<string, string>;
  /** A batch writing this many bytes is checkpointed right after it commits. */
  bigWrite: number;
}

/** A batch to commit (`seq` names its reply), or the order to close. */
export type WriterMessage = { seq: number; jobs: WriteJob[]; bytes: number } | { close: true };
export type WriterReply = { ready: true } | { seq: number; outcomes: Outcome[] } | { seq: number; failed: { message: string; code?: string } };

const port = parentPort!;
const data = workerData as WriterData;
const db = new Database(data.path);
applyPragmas(db);
const batch = makeOps(db, data.sql);
const reply = (m: WriterReply) => port.postMessage(m);

port.on('message', (m: WriterMessage) => {
  if ('close' in m) {
    db.close();
    port.close();
    return;
  }
  let outcomes: Outcome[];
  try {
    outcomes = batch(m.jobs);
  } catch (e) {
    reply({ seq: m.seq, failed: errorOf(e) }); // the whole batch rolled back
    return;
  }
  reply({ seq: m.seq, outcomes });
  // after a large write, move the WAL into the database now (so a big message is not held twice, in
  // the WAL and the file, until the next automatic checkpoint); the WAL is then cut back
  if (m.bytes > data.bigWrite) {
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // another connection holds the database: the automatic checkpoint does it later
    }
  }
});
reply({ ready: true });
