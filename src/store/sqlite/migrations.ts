// Versioned schema migrations: the SQL files in ./migrations/ (NNNN-name.sql), applied in the order
// of their numbers, each in one transaction; PRAGMA user_version records the last applied one. A new
// migration is a new file with the next number (never an edit of an applied one). The build copies
// the folder beside the bundle (scripts/build.mjs), so it is found next to this module either way.
import { readdirSync, readFileSync } from 'node:fs';

const DIR = new URL('./migrations/', import.meta.url);

/** The migrations' SQL, in order (the file named 0001-… first). */
export function migrationSql(): string[] {
  const files = readdirSync(DIR).filter((f) => /^\d{4}-[a-z0-9-]+\.sql$/.test(f)).sort();
  files.forEach((f, i) => {
    if (Number(f.slice(0, 4)) !== i + 1) throw new Error(`store migrations: ${f} is out of sequence (expected ${String(i + 1).padStart(4, '0')}-…)`);
  });
  return files.map((f) => readFileSync(new URL(f, DIR), 'utf8'));
}

/** Statements shared by the main connection and the writer thread. */
export const SQL = {
  insertMessage: 'INSERT INTO messages (key, raw, expires_at) VALUES (?, ?, ?)',
  insertSearch: 'INSERT OR IGNORE INTO message_search (message_key, text) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)',
  insertEmail: `INSERT INTO emails (id, address, message_key, sender, mailed_by, subject, has_attachments, received_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  setViews: 'UPDATE messages SET views = ? WHERE key = ?',
  insertAuth: 'INSERT OR IGNORE INTO message_auth (message_key, envelope) VALUES (?, ?)',
  setAuth: `INSERT INTO message_auth (message_key, verdicts) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)
      ON CONFLICT(message_key) DO UPDATE SET verdicts = excluded.verdicts`,
  clearParts: 'DELETE FROM message_parts WHERE message_key = ?',
  insertPart: 'INSERT INTO message_parts (message_key, n, content) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)',
  sweepEmails: 'DELETE FROM emails WHERE id IN (SELECT id FROM emails WHERE expires_at <= ? LIMIT ?)',
  sweepMessages: 'DELETE FROM messages WHERE key IN (SELECT key FROM messages WHERE expires_at <= ? LIMIT ?)',
};
