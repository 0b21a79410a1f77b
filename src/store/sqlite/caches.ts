// Read caches of the SQLite store: exact (forgotten by every write that could change them), bounded.
import type { EmailSummary } from '../store.ts';

/**
 * Recent listEmails results per address, so that pollers and woken long-polls repeating the same
 * query do not each read the rows again. Bounded by addresses (10,000) and by the characters of the
 * summaries it holds (16 M). Exact, not approximate: an entry answers only a `now` at or
 * after the one it was read at, before any of its emails expires, within a second; every write that
 * can change an address's list forgets it (this process is the only writer of emails: the store is
 * not shared across processes).
 */
export function createListCache() {
  interface Entry { at: number; until: number; rows: EmailSummary[]; chars: number }
  const MAX_ADDRESSES = 10_000;
  const MAX_AGE_MS = 1000;
  /** Characters of summaries held in all (a summary's sender and subject are at most 1,000 each). */
  const MAX_CHARS = 16 * 1024 * 1024;
  let byAddress = new Map<string, Map<string, Entry>>();
  let chars = 0;
  const sizeOf = (rows: EmailSummary[]) => rows.reduce((n, r) => n + r.sender.length + r.subject.length + r.address.length + 160, 0);
  const drop = (m: Map<string, Entry> | undefined) => {
    for (const e of m?.values() ?? []) chars -= e.chars;
  };
  return {
    get(address: string, key: string, now: number): EmailSummary[] | null {
      const e = byAddress.get(address)?.get(key);
      return e && now >= e.at && now < e.until ? e.rows.slice() : null;
    },
    put(address: string, key: string, now: number, rows: EmailSummary[]): void {
      let until = now + MAX_AGE_MS;
      for (const r of rows) if (r.expiresAt < until) until = r.expiresAt;
      const size = sizeOf(rows);
      if (size > MAX_CHARS / 64) return; // too big to be worth keeping
      let m = byAddress.get(address);
      if (!m) {
        if (byAddress.size >= MAX_ADDRESSES) this.clear();
        byAddress.set(address, (m = new Map()));
      }
      if (chars + size > MAX_CHARS) {
        this.clear();
        byAddress.set(address, (m = new Map()));
      }
      if (m.size >= 16) {
        drop(m);
        m.clear();
      }
      const old = m.get(key);
      if (old) chars -= old.chars;
      m.set(key, { at: now, until, rows: rows.slice(), chars: size });
      chars += size;
    },
    forget(address: string): void {
      drop(byAddress.get(address));
      byAddress.delete(address);
    },
    clear(): void {
      byAddress = new Map();
      chars = 0;
    },
    /** Characters held (tests). */
    get chars() {
      return chars;
    },
  };
}
