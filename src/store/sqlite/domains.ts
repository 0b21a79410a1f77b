// Domains added at run time, on SQLite: one small table (migration 4), written on the main
// connection in one transaction per change (synchronous=FULL: durable when it returns). The CLI
// writes the same file while the service runs; the service reads it again every second.
import type Database from 'better-sqlite3';
import type { AddDomainResult, DomainRecord, DomainStore } from '../domains.ts';

interface DomainRow { domain: string; added_at: number; retired_at: number | null }

const toRecord = (r: DomainRow): DomainRecord => ({ domain: r.domain, addedAt: r.added_at, retiredAt: r.retired_at });

export function createSqliteDomains(db: Database.Database, guard: <T>(fn: () => T) => Promise<T>): DomainStore {
  const q = {
    all: db.prepare('SELECT domain, added_at, retired_at FROM domains ORDER BY added_at ASC, domain ASC'),
    get: db.prepare('SELECT domain, added_at, retired_at FROM domains WHERE domain = ?'),
    active: db.prepare('SELECT count(*) FROM domains WHERE retired_at IS NULL').pluck(),
    put: db.prepare('INSERT INTO domains (domain, added_at, retired_at) VALUES (?, ?, NULL) ON CONFLICT(domain) DO UPDATE SET added_at = excluded.added_at, retired_at = NULL'),
    retire: db.prepare('UPDATE domains SET retired_at = ? WHERE domain = ? AND retired_at IS NULL'),
  };
  const add = db.transaction((domain: string, now: number, maxActive: number): AddDomainResult => {
    const cur = q.get.get(domain) as DomainRow | undefined;
    if (cur && cur.retired_at === null) return { ok: true, changed: false, record: toRecord(cur) };
    const active = q.active.get() as number;
    if (active >= maxActive) return { ok: false, active };
    q.put.run(domain, now);
    return { ok: true, changed: true, record: { domain, addedAt: now, retiredAt: null } };
  });
  const retire = db.transaction((domain: string, now: number): DomainRecord | null => {
    q.retire.run(now, domain);
    const r = q.get.get(domain) as DomainRow | undefined;
    return r ? toRecord(r) : null;
  });
  return {
    listDomains: () => guard(() => (q.all.all() as DomainRow[]).map(toRecord)),
    addDomain: (domain, now, maxActive) => guard(() => add.immediate(domain, now, maxActive)),
    retireDomain: (domain, now) => guard(() => retire.immediate(domain, now)),
  };
}
