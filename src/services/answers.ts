// The read model: one cache of answers, by email id, for every face that reads an email in full
// (the API's `GET /emails/{id}` body; another face may keep its own rendering under its own name).
// An answer is what the face sends, as bytes: what it holds is counted exactly (its byteLength plus a
// fixed overhead per entry), so the bound in bytes is true whatever the email holds.
//
// The one staleness rule:
//   an answer is kept only once it is final (its views derived and kept, its verdicts complete, no
//   view waiting to be asked again: services/views.ts isFinal); it answers only for the same stored
//   message (the caller reads the email's row first, so a delete on any node or an expiry is seen
//   at once; a store whose every delete goes through this process, SQLite, counts its deletes, and
//   while that count and the clock say nothing can have changed the row is not read again: `fresh`);
//   and it is dropped when this node changes the message's kept views (a
//   view asked again), deletes it, or sweeps it as expired. Verdicts never change once computed, and
//   a first write of views or verdicts writes what the reader was already given.
// Least recently used answers go first when the bytes run out, one at a time (never all at once).
export interface AnswerCacheStats {
  hits: number;
  misses: number;
  bytes: number;
  entries: number;
}

export interface AnswerCache {
  /**
   * The kept answer of `face` for email `id` of message `messageKey`, else undefined (counted as a hit
   * or a miss). `checked`: the store's deletions count the row was read at (Store.deletions).
   */
  get(face: string, id: string, messageKey: string, checked?: number): Buffer | undefined;
  /**
   * The kept answer of `face` for email `id` without its row: only while the store's deletions count
   * is still `checked` (the one its row was last read at) and the email has not expired by `now`;
   * a hit when it answers, else nothing is counted (the caller reads the row and asks `get`).
   */
  fresh(face: string, id: string, checked: number, now: number): Buffer | undefined;
  /** Keeps a final answer (one larger than an eighth of the cache is not kept). */
  put(face: string, id: string, messageKey: string, expiresAt: number, answer: Buffer, checked?: number): void;
  /** Drops every answer of a message (its kept views changed: a view asked again). */
  forgetMessage(messageKey: string): void;
  /** Drops every answer of an email id (deleted). */
  forgetEmail(id: string): void;
  /** Drops the answers of emails that expired by `now`. */
  sweep(now: number): void;
  readonly stats: AnswerCacheStats;
  clear(): void;
}

/** Default bytes held: EPHEMAIL_ANSWER_CACHE_BYTES. */
export const ANSWER_CACHE_BYTES = 16 * 1024 * 1024;
/** What an entry costs beyond its answer: the map entry, its key strings and the record. */
export const ANSWER_OVERHEAD_BYTES = 256;

interface Entry {
  messageKey: string;
  expiresAt: number;
  answer: Buffer;
  bytes: number;
  /** The store's deletions count its row was last read at (undefined: read it on every read). */
  checked: number | undefined;
}

export function createAnswerCache(maxBytes = ANSWER_CACHE_BYTES): AnswerCache {
  // insertion order is recency order: a hit moves its entry to the end, eviction takes the front
  const entries = new Map<string, Entry>();
  /** The keys of each message's answers (a message's faces), so a write drops them together. */
  const byMessage = new Map<string, Set<string>>();
  /** The faces answers were kept for (an email's answers are found by face and id). */
  const faces = new Set<string>();
  let bytes = 0;
  let hits = 0;
  let misses = 0;
  const keyOf = (face: string, id: string) => `${face} ${id}`;

  const drop = (k: string) => {
    const e = entries.get(k);
    if (!e) return;
    entries.delete(k);
    bytes -= e.bytes;
    const set = byMessage.get(e.messageKey);
    set?.delete(k);
    if (set?.size === 0) byMessage.delete(e.messageKey);
  };

  return {
    get(face, id, messageKey, checked) {
      const k = keyOf(face, id);
      const e = entries.get(k);
      if (!e || e.messageKey !== messageKey) {
        if (e) drop(k); // (another message under the same id cannot happen; an answer for it is never kept)
        misses++;
        return undefined;
      }
      hits++;
      e.checked = checked;
      entries.delete(k);
      entries.set(k, e);
      return e.answer;
    },
    fresh(face, id, checked, now) {
      const k = keyOf(face, id);
      const e = entries.get(k);
      if (!e || e.checked !== checked || e.expiresAt <= now) return undefined;
      hits++;
      entries.delete(k);
      entries.set(k, e);
      return e.answer;
    },
    put(face, id, messageKey, expiresAt, answer, checked) {
      const k = keyOf(face, id);
      drop(k);
      const size = answer.byteLength + ANSWER_OVERHEAD_BYTES + 2 * (k.length + messageKey.length);
      if (size > maxBytes / 8) return;
      for (const old of entries.keys()) {
        if (bytes + size <= maxBytes) break;
        drop(old);
      }
      entries.set(k, { messageKey, expiresAt, answer, bytes: size, checked });
      bytes += size;
      faces.add(face);
      let set = byMessage.get(messageKey);
      if (!set) byMessage.set(messageKey, (set = new Set()));
      set.add(k);
    },
    forgetMessage(messageKey) {
      const set = byMessage.get(messageKey);
      if (set) for (const k of [...set]) drop(k);
    },
    forgetEmail(id) {
      for (const face of faces) drop(keyOf(face, id));
    },
    sweep(now) {
      for (const [k, e] of entries) if (e.expiresAt <= now) drop(k);
    },
    get stats() {
      return { hits, misses, bytes, entries: entries.size };
    },
    clear() {
      entries.clear();
      byMessage.clear();
      faces.clear();
      bytes = 0;
    },
  };
}
