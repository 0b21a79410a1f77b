// API keys on SQLite: `api_keys` and, apart, their last use in `api_key_use` (migrations.ts), written
// on the main connection (synchronous=FULL: a new key is durable when addKey returns).
// `created_ip` is written '': the limiter counts an IP's mints now (services/keys.ts).
import type Database from 'better-sqlite3';
import type { KeyRecord, KeyStore } from '../keys.ts';

interface KeyRow {
  hash: string;
  prefix: string;
  label: string;
  contact_email: string | null;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
}

const toKey = (r: KeyRow): KeyRecord => ({
  hash: r.hash,
  prefix: r.prefix,
  label: r.label,
  contactEmail: r.contact_email,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at ?? null,
});
/** A key's columns with its last use. */
const KEY_SELECT = 'SELECT k.hash, k.prefix, k.label, k.contact_email, k.created_at, k.revoked_at, u.last_used_at FROM api_keys k LEFT JOIN api_key_use u ON u.hash = k.hash';

/**
 * The keys a revocation by prefix marks: a range of the prefix index (api_keys_by_prefix), every key
 * whose prefix starts with @prefix (below it followed by U+10FFFF, the greatest character), never a
 * scan of every key. Exported for the test that reads its query plan.
 */
export const REVOKABLE_SQL = `${KEY_SELECT} WHERE k.prefix >= @prefix AND k.prefix < @prefix || char(1114111) AND substr(k.prefix, 1, length(@prefix)) = @prefix AND k.revoked_at IS NULL`;

export function createSqliteKeys(db: Database.Database, guard: <T>(fn: () => T) => Promise<T>): KeyStore {
  const q = {
    insert: db.prepare(`INSERT INTO api_keys (hash, prefix, label, contact_email, created_at, created_ip, revoked_at)
      VALUES (?, ?, ?, ?, ?, '', NULL)`),
    find: db.prepare(`${KEY_SELECT} WHERE k.hash = ?`),
    list: db.prepare(`${KEY_SELECT} ORDER BY k.created_at ASC, k.prefix ASC`),
    revokable: db.prepare(REVOKABLE_SQL),
    revoke: db.prepare('UPDATE api_keys SET revoked_at = ? WHERE hash = ?'),
    touch: db.prepare(`INSERT INTO api_key_use (hash, last_used_at) SELECT hash, ? FROM api_keys WHERE hash = ?
      ON CONFLICT(hash) DO UPDATE SET last_used_at = max(last_used_at, excluded.last_used_at)`),
  };
  // Read-then-write transactions on this connection run BEGIN IMMEDIATE (`.immediate`): a deferred one
  // that read first cannot take the write lock once the writer thread committed in between
  // (SQLITE_BUSY_SNAPSHOT, which busy_timeout does not wait out), and failed as "store unreachable".
  const revoke = db.transaction((prefix: string, now: number): KeyRecord[] => {
    const rows = (q.revokable.all({ prefix }) as KeyRow[]).map(toKey);
    for (const r of rows) q.revoke.run(now, r.hash);
    return rows.map((r) => ({ ...r, revokedAt: now }));
  });
  return {
    addKey: (key) => guard(() => void q.insert.run(key.hash, key.prefix, key.label, key.contactEmail, key.createdAt)),
    findKey: (hash) =>
      guard(() => {
        const r = q.find.get(hash) as KeyRow | undefined;
        return r ? toKey(r) : null;
      }),
    listKeys: () => guard(() => (q.list.all() as KeyRow[]).map(toKey)),
    revokeKeys: (prefix, now) => guard(() => revoke.immediate(prefix, now)),
    touchKey: (hash, at) => guard(() => void q.touch.run(at, hash)),
  };
}
