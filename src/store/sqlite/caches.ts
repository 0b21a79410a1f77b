// Read caches of the SQLite store: exact (forgotten by every write that could change them), bounded.
import type { EmailSummary } from '../store.ts';

/**
 * Recent listEmails results per address, so that pollers and woken long-polls repeating the same
 * query do not each read the rows again. Exact, not approximate: an entry answers only a `now` at or
 * after the one it was read at, before any of its emails expires, within a second; every write that
 * can change an address's list forgets it (this process is the only writer of emails: the store is
 * not shared across processes).
 */
export function createListCache() {
  interface Entry { at: number; until: number; rows: EmailSummary[] }
  const MAX_ADDRESSES = 10_000;
  const MAX_AGE_MS = 1000;
  let byAddress = new Map<string, Map<string, Entry>>();
  return {
    get(address: string, key: string, now: number): EmailSummary[] | null {
      const e = byAddress.get(address)?.get(key);
      return e && now >= e.at && now < e.until ? e.rows.slice() : null;
    },
    put(address: string, key: string, now: number, rows: EmailSummary[]): void {
      let until = now + MAX_AGE_MS;
      for (const r of rows) if (r.expiresAt < until) until = r.expiresAt;
      let m = byAddress.get(address);
      if (!m) {
        if (byAddress.size >= MAX_ADDRESSES) byAddress = new Map();
        byAddress.set(address, (m = new Map()));
      }
      if (m.size >= 16) m.clear();
      m.set(key, { at: now, until, rows: rows.slice() });
    },
    forget(address: string): void {
      byAddress.delete(address);
    },
    clear(): void {
      byAddress.clear();
    },
  };
}
