// The connection settings every connection to the SQLite file uses (the main connection, the
// writer thread's, the IMAP numbering's): written once, here.
import type Database from 'better-sqlite3';

/** The WAL is cut back to this after a checkpoint. */
export const WAL_LIMIT = 16 * 1024 * 1024;

export function applyPragmas(db: Database.Database): void {
  db.pragma('journal_mode = WAL'); // readers never block the writer
  db.pragma('synchronous = FULL'); // a commit is on disk before addEmails resolves: a 250 is never lost, even on power loss
  db.pragma('foreign_keys = ON'); // freeing a message frees its parts
  db.pragma('temp_store = MEMORY'); // temporary tables and a rolled-back batch's journal in memory, never a temp file
  db.pragma('busy_timeout = 5000'); // the operator CLI may hold the write lock briefly
  db.pragma(`journal_size_limit = ${WAL_LIMIT}`);
}
