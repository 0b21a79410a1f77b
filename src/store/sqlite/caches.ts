// Read caches of the SQLite store: exact (forgotten by every write that could change them), bounded.
import type { EmailFull, EmailSummary } from '../store.ts';

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

/**
 * Recently read emails by id: an email never changes after it is stored, so a copy answers until it
 * expires, is deleted or purged (each forgets it; a sweep forgets all). Bounded by count and by the
 * size of the bodies it holds; filled by reads only, never by ingest.
 */
export function createEmailCache() {
  const MAX_ENTRIES = 2000;
  const MAX_CHARS = 8 * 1024 * 1024;
  let byId = new Map<string, { email: EmailFull; chars: number }>();
  let chars = 0;
  const copy = (e: EmailFull): EmailFull => ({ ...e, headers: e.headers.map((h) => ({ ...h })), attachments: e.attachments.map((a) => ({ ...a })) });
  return {
    get(id: string, now: number): EmailFull | null {
      const e = byId.get(id);
      return e && now < e.email.expiresAt ? copy(e.email) : null;
    },
    put(email: EmailFull): EmailFull {
      const size = (email.textBody?.length ?? 0) + (email.htmlBody?.length ?? 0) + 1024;
      if (size > MAX_CHARS / 8) return email;
      if (byId.size >= MAX_ENTRIES || chars + size > MAX_CHARS) {
        byId = new Map();
        chars = 0;
      }
      byId.set(email.id, { email: copy(email), chars: size });
      chars += size;
      return email;
    },
    forget(id: string): void {
      const e = byId.get(id);
      if (!e) return;
      byId.delete(id);
      chars -= e.chars;
    },
    clear(): void {
      byId = new Map();
      chars = 0;
    },
  };
}
