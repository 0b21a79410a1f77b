// Read caching for any Store, as one wrapper (of the mail and key seams; the others read through).
// Pollers repeating the same list, readers opening one email after another and every request of an
// API key read the same few things again; this answers them from memory. It passes the shared
// suites (test/conformance: mail, keys, and the others through it) like a backend.
//
// The one staleness rule:
//   an entry answers for at most `maxAgeMs` (250 ms) after it was read, never past the expiry of
//   what it holds, and a write made through this store forgets, at once, every entry it can change.
// So this process always sees its own writes; writes made elsewhere show within `maxAgeMs`. The
// only such writes that may be cached are key revocations (the operator's CLI, another node). Emails
// written elsewhere must be seen at once (a long-poll is woken for them), so over a store shared
// across processes (Redis) lists and rows are read through and only keys are cached.
//
// Bounded by bytes, counted as an upper bound of what each entry holds: its strings come from the
// backend's rows (better-sqlite3 makes each one a flat string of its own, never a slice of a larger
// one), counted at two bytes a character (V8 stores them in one or two), and a fixed 256 bytes per
// row covers the object, its string headers and its boxed times (test/store/read-cache.test.ts
// checks the count against the heap the pages take). The oldest entries go first.
import type { EmailSummary } from '../domain/summary.ts';
import type { KeyRecord } from './keys.ts';
import type { ListQuery, Store, StoredEmail } from './store.ts';

export interface ReadCacheOptions {
  /** Bytes held at most (counted as an upper bound: two per character plus a fixed overhead per row). Default 32 MiB. */
  maxBytes?: number;
  /** How long an entry answers at most. Default 250 ms. */
  maxAgeMs?: number;
  /** Monotonic milliseconds for the age of entries (real time, whatever the service's clock says). */
  clock?: () => number;
}

export const READ_CACHE_MAX_AGE_MS = 250;
const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;
const ENTRY_OVERHEAD = 160;

interface Entry {
  value: EmailSummary[] | StoredEmail | KeyRecord;
  /** Monotonic time it was read at. */
  readAt: number;
  /** For lists and rows: the service `now` it was read for (answers only a later or equal now)… */
  now: number;
  /** …and the earliest expiry of what it holds (answers only before it). */
  expiresAt: number;
  /** The inbox it belongs to ('' for keys). */
  address: string;
  bytes: number;
}

/** A list row's (or key record's) fixed cost: the object, its string headers, its boxed times (~220 bytes measured on Node 24), with room. */
const ROW_OVERHEAD = 256;
const summaryBytes = (r: EmailSummary) => ROW_OVERHEAD + 2 * (r.id.length + r.address.length + r.sender.length + r.subject.length + (r.mailedBy?.length ?? 0));
const keyBytes = (k: KeyRecord) => ROW_OVERHEAD + 2 * (k.hash.length + k.prefix.length + k.label.length + (k.contactEmail?.length ?? 0));
const listKey = (address: string, q: ListQuery) =>
  `l ${address} ${q.since ? `s${q.since.toLowerCase()}` : q.before ? `b${q.before.toLowerCase()}` : ''} ${q.limit}`;

/** A cached view of `store` (see the staleness rule above). `cacheStats` is for tests. */
export function withReadCache(store: Store, options: ReadCacheOptions = {}): Store & { readonly cacheStats: { entries: number; bytes: number } } {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const maxAgeMs = options.maxAgeMs ?? READ_CACHE_MAX_AGE_MS;
  const clock = options.clock ?? (() => performance.now());
  const emails = !store.capabilities.sharedAcrossProcesses;

  // insertion order is age order: eviction takes from the front
  const entries = new Map<string, Entry>();
  /** Keys of the entries of each inbox (lists and rows), so one write forgets them together. */
  const byAddress = new Map<string, Set<string>>();
  let bytes = 0;
  /** Counts writes of emails and of keys: a read that overlapped one does not keep what it read. */
  const writes = { emails: 0, keys: 0 };
  type Kind = keyof typeof writes;

  const forgetKey = (k: string) => {
    const e = entries.get(k);
    if (!e) return;
    entries.delete(k);
    bytes -= e.bytes;
    if (e.address) {
      const set = byAddress.get(e.address);
      set?.delete(k);
      if (set?.size === 0) byAddress.delete(e.address);
    }
  };
  const forgetAddress = (address: string) => {
    for (const k of byAddress.get(address) ?? []) forgetKey(k);
  };
  const forgetWhere = (prefix: string) => {
    for (const k of [...entries.keys()]) if (k.startsWith(prefix)) forgetKey(k);
  };
  const put = (k: string, e: Entry) => {
    if (e.bytes > maxBytes / 16) return; // too big to be worth keeping
    forgetKey(k);
    for (const [old] of entries) {
      if (bytes + e.bytes <= maxBytes) break;
      forgetKey(old);
    }
    entries.set(k, e);
    bytes += e.bytes;
    if (e.address) {
      let set = byAddress.get(e.address);
      if (!set) byAddress.set(e.address, (set = new Set()));
      set.add(k);
    }
  };
  /** The live entry under `k`, or undefined (a stale one is dropped). */
  const fresh = (k: string, now: number): Entry | undefined => {
    const e = entries.get(k);
    if (!e) return undefined;
    if (clock() - e.readAt < maxAgeMs && now >= e.now && now < e.expiresAt) return e;
    forgetKey(k);
    return undefined;
  };
  /** Runs a write, forgetting before it starts and again once it settled. */
  const write = <T>(kind: Kind, forget: () => void, run: () => Promise<T>): Promise<T> => {
    writes[kind]++;
    forget();
    const after = () => {
      writes[kind]++;
      forget();
    };
    return run().then((v) => (after(), v), (err) => {
      after();
      throw err;
    });
  };
  /** Reads through, keeping the result unless a write ran meanwhile. */
  const read = <T>(kind: Kind, run: () => Promise<T>, keep: (v: T, readAt: number) => void): Promise<T> => {
    const before = writes[kind];
    const readAt = clock();
    return run().then((v) => {
      if (writes[kind] === before) keep(v, readAt);
      return v;
    });
  };

  /** A live page held now (the kept array, frozen, like a row), else undefined. */
  const peekList = (address: string, query: ListQuery, now: number): EmailSummary[] | undefined => {
    if (!emails) return undefined;
    return fresh(listKey(address, query), now)?.value as EmailSummary[] | undefined;
  };
  const peekKey = (hash: string): KeyRecord | undefined => fresh(`k ${hash}`, 0)?.value as KeyRecord | undefined;

  return {
    get capabilities() {
      return store.capabilities;
    },
    get webhooks() {
      return store.webhooks;
    },
    // (read through: services/domains.ts keeps its own copy, refreshed every second)
    get domains() {
      return store.domains;
    },
    // (read through: a rule must hold at once on every node)
    get faults() {
      return store.faults;
    },
    get deletions() {
      return store.deletions;
    },
    get cacheStats() {
      return { entries: entries.size, bytes };
    },
    addEmails: (list, events) => {
      const addresses = [...new Set(list.map((e) => e.address))];
      return write('emails', () => addresses.forEach(forgetAddress), () => store.addEmails(list, events));
    },
    peekList,
    listEmails(address, query, now) {
      if (!emails) return store.listEmails(address, query, now);
      const k = listKey(address, query);
      const hit = fresh(k, now)?.value as EmailSummary[] | undefined; // (peekList, with its key built once)
      if (hit) return Promise.resolve(hit);
      return read('emails', () => store.listEmails(address, query, now), (rows, readAt) => {
        let expiresAt = Infinity;
        let size = ENTRY_OVERHEAD;
        for (const r of rows) {
          if (r.expiresAt < expiresAt) expiresAt = r.expiresAt;
          size += summaryBytes(r);
        }
        put(k, { value: Object.freeze(rows.slice()) as EmailSummary[], readAt, now, expiresAt, address, bytes: size });
      });
    },
    hasEmails: (address, now) => store.hasEmails(address, now),
    // rows by id are read through: the read model (services/answers.ts) keeps what a read of one
    // email answers, and checks the row on every read (a cached row would only be a second copy)
    getEmail: (id, now) => store.getEmail(id, now),
    readRaw: (key) => store.readRaw(key),
    getViews: (key) => store.getViews(key),
    putViews: (key, views, parts) => store.putViews(key, views, parts),
    getAuthentication: (key) => store.getAuthentication(key),
    putAuthentication: (key, verdicts) => store.putAuthentication(key, verdicts),
    // search texts are never cached: a search reads at most a page's worth per call
    matchText: (ids, needle, now) => store.matchText(ids, needle, now),
    putSearchText: (key, text) => store.putSearchText(key, text),
    readPart: (key, index) => store.readPart(key, index),
    // (every list: which inbox the email was in is not known here; a delete is rare)
    deleteEmail: (id, now) => write('emails', () => forgetWhere('l '), () => store.deleteEmail(id, now)),
    purgeInbox: (address, now) => write('emails', () => forgetAddress(address), () => store.purgeInbox(address, now)),
    // what expired by `now` is deleted for good: entries holding it go (a read for an earlier now
    // must not find it either)
    sweepExpired: (now) => write('emails', () => {
      for (const [k, e] of [...entries]) if (e.expiresAt <= now) forgetKey(k);
    }, () => store.sweepExpired(now)),
    addKey: (key) => write('keys', () => forgetKey(`k ${key.hash}`), () => store.addKey(key)),
    peekKey,
    findKey(hash) {
      const k = `k ${hash}`;
      const hit = peekKey(hash);
      if (hit) return Promise.resolve(hit);
      return read('keys', () => store.findKey(hash), (key, readAt) => {
        if (key) put(k, { value: Object.freeze({ ...key }), readAt, now: 0, expiresAt: Infinity, address: '', bytes: keyBytes(key) });
      });
    },
    listKeys: () => store.listKeys(),
    revokeKeys: (prefix, now) => write('keys', () => forgetWhere('k '), () => store.revokeKeys(prefix, now)),
    // a use changes no answer authentication depends on: nothing is forgotten (a cached record's
    // lastUsedAt may be up to maxAgeMs old, like any key read)
    touchKey: (hash, at) => store.touchKey(hash, at),
    ping: () => store.ping(),
    close: () => {
      entries.clear();
      byAddress.clear();
      bytes = 0;
      return store.close();
    },
  };
}
