// The IMAP UID seam (docs/imap.md "UIDs"): each address's emails are numbered 1, 2, 3… in the order
// of their ids the first time any session lists them, on any node; a number is never given again
// while the address's numbering lives (UIDVALIDITY, kept at least a day past the address's last
// mail). Ids of one inbox become visible in increasing order (MailRows.capabilities), so numbering
// the ids above the last numbered one, in id order, keeps UIDs increasing with ids. Kept apart from
// the mail rows: the SMTP insert path does not change. Backends: memory (sqlite::memory:), a
// SQLite file beside the store's (sqlite/uids.ts), Redis (redis/uids.ts).

export interface Numbering {
  /** UIDVALIDITY: the numbering's start, in seconds since the epoch (fits 32 bits until 2106). */
  validity: number;
  /** The UID of each id given, in their order; 0 for an id below the last numbered one that has none (never for mail listed in order). */
  uids: number[];
  /** UIDNEXT: the number the next new email will get. */
  next: number;
}

export interface UidStore {
  /**
   * Numbers `ids` (one address's, increasing): each id already numbered keeps its UID, each above
   * the last numbered id gets the next. `complete`: the ids are every live email of the address, so
   * entries below the first are dropped. `keepUntil`: the numbering lives at least until then.
   */
  number(address: string, ids: readonly string[], complete: boolean, keepUntil: number, now: number): Promise<Numbering>;
  close(): Promise<void>;
}

/** How long a numbering outlives the address's last email, so a new one never starts in the same second as an old one ended. */
export const KEEP_AFTER_MS = 24 * 60 * 60 * 1000;

interface Box {
  validity: number;
  n: number;
  last: string;
  keepUntil: number;
  uids: Map<string, number>;
}

/** In this process's memory (sqlite::memory: and tests): the same rules, lost with the process like the mail. */
export function createMemoryUids(): UidStore {
  const boxes = new Map<string, Box>();
  let calls = 0;
  return {
    async number(address, ids, complete, keepUntil, now) {
      if (++calls % 256 === 0) for (const [a, b] of boxes) if (b.keepUntil <= now) boxes.delete(a);
      let box = boxes.get(address);
      if (!box || box.keepUntil <= now) boxes.set(address, (box = { validity: Math.floor(now / 1000), n: 0, last: '', keepUntil, uids: new Map() }));
      box.keepUntil = Math.max(box.keepUntil, keepUntil);
      const uids = ids.map((id) => {
        const u = box.uids.get(id);
        if (u !== undefined) return u;
        if (id <= box.last) return 0;
        box.n += 1;
        box.last = id;
        box.uids.set(id, box.n);
        return box.n;
      });
      if (complete) {
        const first = uids.find((u) => u > 0) ?? Infinity;
        for (const [id, u] of box.uids) if (u < first) box.uids.delete(id);
      }
      return { validity: box.validity, uids, next: box.n + 1 };
    },
    async close() {
      boxes.clear();
    },
  };
}
