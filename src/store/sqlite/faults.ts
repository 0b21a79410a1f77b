// SMTP faults on SQLite: one table (migration 6) in the store's file, on the main connection. A use
// (takeFault) is a BEGIN IMMEDIATE transaction, so it never races the writer thread; an address
// without rules costs one indexed read and no transaction, and none at all while no rule is stored. A revoked key's rules never apply: the
// queries that pick a rule skip any whose key is revoked in api_keys (same file, same transaction).
import type Database from 'better-sqlite3';
import { keptCount } from './kept-count.ts';
import type { AddFaultResult, FaultFilter, FaultRule, FaultStage, FaultStore } from '../faults.ts';

interface Row {
  id: string; key_hash: string; address: string; stage: FaultStage; reply: string | null; delay_seconds: number | null;
  disconnect: number; times: number | null; remaining: number | null; created_at: number; expires_at: number;
}
const toRule = (r: Row): FaultRule => ({
  id: r.id, keyHash: r.key_hash, address: r.address, stage: r.stage, reply: r.reply, delaySeconds: r.delay_seconds,
  disconnect: r.disconnect !== 0, times: r.times, remaining: r.remaining, createdAt: r.created_at, expiresAt: r.expires_at,
});
const LIVE = `expires_at > ? AND (remaining IS NULL OR remaining > 0)
  AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.hash = smtp_faults.key_hash AND k.revoked_at IS NOT NULL)`;

/** The fault store, and `expireFaults(now)` for the store's sweep. */
export function createSqliteFaults(db: Database.Database, guard: <T>(fn: () => T) => Promise<T>): FaultStore & { expireFaults(now: number): number } {
  const q = {
    countAddress: db.prepare('SELECT count(*) FROM smtp_faults WHERE address = ? AND key_hash = ? AND expires_at > ?').pluck(),
    countKey: db.prepare('SELECT count(*) FROM smtp_faults WHERE key_hash = ? AND expires_at > ?').pluck(),
    insert: db.prepare(`INSERT INTO smtp_faults (id, key_hash, address, stage, reply, delay_seconds, disconnect, times, remaining, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    list: db.prepare('SELECT * FROM smtp_faults WHERE address = ? AND key_hash = ? AND expires_at > ? ORDER BY seq ASC'),
    clear: db.prepare('DELETE FROM smtp_faults WHERE address = ? AND key_hash = ?'),
    del: db.prepare('DELETE FROM smtp_faults WHERE address = ? AND key_hash = ? AND id = ?'),
    ofAddress: db.prepare('SELECT * FROM smtp_faults WHERE address = ? AND expires_at > ? ORDER BY seq ASC'),
    ofKey: db.prepare('SELECT * FROM smtp_faults WHERE key_hash = ? AND expires_at > ? ORDER BY seq ASC'),
    clearAddress: db.prepare('DELETE FROM smtp_faults WHERE address = ?'),
    clearKey: db.prepare('DELETE FROM smtp_faults WHERE key_hash = ?'),
    any: db.prepare(`SELECT 1 FROM smtp_faults WHERE address = ? AND ${LIVE} LIMIT 1`).pluck(),
    first: db.prepare(`SELECT * FROM smtp_faults WHERE address = ? AND stage = ? AND ${LIVE} ORDER BY seq ASC LIMIT 1`),
    use: db.prepare('UPDATE smtp_faults SET remaining = remaining - 1 WHERE id = ? AND remaining > 0'),
    anyData: db.prepare(`SELECT 1 FROM smtp_faults WHERE address = ? AND stage = 'data' AND ${LIVE} LIMIT 1`).pluck(),
    expire: db.prepare('DELETE FROM smtp_faults WHERE expires_at <= ?'),
    countAll: db.prepare('SELECT count(*) FROM smtp_faults').pluck(),
  };
  const add = db.transaction((r: FaultRule, maxPerAddress: number, maxPerKey: number, now: number): AddFaultResult => {
    if ((q.countAddress.get(r.address, r.keyHash, now) as number) >= maxPerAddress) return 'address_full';
    if ((q.countKey.get(r.keyHash, now) as number) >= maxPerKey) return 'key_full';
    q.insert.run(r.id, r.keyHash, r.address, r.stage, r.reply, r.delaySeconds, r.disconnect ? 1 : 0, r.times, r.remaining, r.createdAt, r.expiresAt);
    return 'ok';
  });
  const take = db.transaction((address: string, stage: FaultStage, now: number) => {
    const row = q.first.get(address, stage, now) as Row | undefined;
    if (row && row.remaining !== null) q.use.run(row.id);
    return { rule: row ? toRule(row) : null, dataRules: q.anyData.get(address, now) === 1 };
  });
  /** Rules stored (live or not yet swept): with none, a recipient asks the database nothing. */
  const stored = keptCount(() => q.countAll.get() as number);
  const recount = <T>(write: () => T): T => stored.after(write);
  return {
    addFault: (r, a, k, now) => guard(() => recount(() => add.immediate(r, a, k, now))),
    listFaults: (address, keyHash, now) => guard(() => (q.list.all(address, keyHash, now) as Row[]).map(toRule)),
    clearFaults: (address, keyHash) => guard(() => recount(() => q.clear.run(address, keyHash).changes)),
    deleteFault: (address, keyHash, id) => guard(() => recount(() => q.del.run(address, keyHash, id).changes > 0)),
    findFaults: (f: FaultFilter, now) => guard(() => {
      const rows = f.address !== undefined && f.keyHash !== undefined ? q.list.all(f.address, f.keyHash, now)
        : f.address !== undefined ? q.ofAddress.all(f.address, now) : q.ofKey.all(f.keyHash, now);
      return (rows as Row[]).map(toRule);
    }),
    removeFaults: (f: FaultFilter) => guard(() => recount(() => (f.address !== undefined && f.keyHash !== undefined ? q.clear.run(f.address, f.keyHash)
      : f.address !== undefined ? q.clearAddress.run(f.address) : q.clearKey.run(f.keyHash)).changes)),
    takeFault: (address, stage, now) => guard(() => {
      // the usual cases: no rule stored at all (no read), none for this address (one read, no transaction)
      if (stored.value === 0 || q.any.get(address, now) !== 1) return { rule: null, dataRules: false };
      return take.immediate(address, stage, now);
    }),
    expireFaults: (now) => recount(() => q.expire.run(now).changes),
  };
}
