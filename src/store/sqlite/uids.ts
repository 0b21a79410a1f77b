// IMAP UIDs on SQLite (store/uids.ts): a database file of its own beside the store's
// (`<path>-imap`), so numbering never contends with the mail writer's transactions. One synchronous
// transaction per call: a single process numbers each address in order.
import Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../domain/errors.ts';
import type { Numbering, UidStore } from '../uids.ts';
import { applyPragmas } from './pragmas.ts';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS imap_boxes (
    address    TEXT PRIMARY KEY,
    validity   INTEGER NOT NULL,   -- UIDVALIDITY (seconds)
    n          INTEGER NOT NULL,   -- the last UID given
    last_id    TEXT NOT NULL,      -- the id it was given to
    keep_until INTEGER NOT NULL    -- epoch ms
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS imap_uids (
    address TEXT NOT NULL,
    id      TEXT NOT NULL,
    uid     INTEGER NOT NULL,
    PRIMARY KEY (address, id)
  ) WITHOUT ROWID;
`;

export function createSqliteUids(path: string): UidStore {
  // opened on first use: a process that never serves IMAP/POP3 (the operator's CLI) creates no file
  let numberer: ((address: string, ids: readonly string[], complete: boolean, keepUntil: number, now: number) => Numbering) | null = null;
  let db: Database.Database | null = null;
  const open = () => {
    db = new Database(path);
    return numbering(db);
  };
  return {
    async number(address, ids, complete, keepUntil, now) {
      try {
        numberer ??= open();
        return numberer(address, ids, complete, keepUntil, now);
      } catch (err) {
        // the seam's rule: a backend that cannot answer is StoreUnavailableError, never a driver's error
        throw new StoreUnavailableError(`IMAP UIDs could not be read: ${(err as Error).message}`, { cause: err });
      }
    },
    async close() {
      db?.close();
      db = null;
      numberer = null;
    },
  };
}

function numbering(db: Database.Database) {
  applyPragmas(db);
  db.exec(SCHEMA);
  const getBox = db.prepare<[string], { validity: number; n: number; last_id: string; keep_until: number }>('SELECT validity, n, last_id, keep_until FROM imap_boxes WHERE address = ?');
  const putBox = db.prepare('INSERT OR REPLACE INTO imap_boxes (address, validity, n, last_id, keep_until) VALUES (?, ?, ?, ?, ?)');
  const dropUids = db.prepare('DELETE FROM imap_uids WHERE address = ?');
  const getUid = db.prepare<[string, string], { uid: number }>('SELECT uid FROM imap_uids WHERE address = ? AND id = ?');
  const putUid = db.prepare('INSERT INTO imap_uids (address, id, uid) VALUES (?, ?, ?)');
  const pruneBelow = db.prepare('DELETE FROM imap_uids WHERE address = ? AND uid < ?');
  const expiredBoxes = db.prepare<[number], { address: string }>('SELECT address FROM imap_boxes WHERE keep_until <= ? LIMIT 100');
  const dropBox = db.prepare('DELETE FROM imap_boxes WHERE address = ?');
  let calls = 0;

  const run = db.transaction((address: string, ids: readonly string[], complete: boolean, keepUntil: number, now: number) => {
    if (++calls % 256 === 0) {
      for (const { address: a } of expiredBoxes.all(now)) {
        dropUids.run(a);
        dropBox.run(a);
      }
    }
    let box = getBox.get(address);
    if (!box || box.keep_until <= now) {
      dropUids.run(address);
      box = { validity: Math.floor(now / 1000), n: 0, last_id: '', keep_until: keepUntil };
    }
    let { n, last_id: last } = box;
    const uids = ids.map((id) => {
      const row = getUid.get(address, id);
      if (row) return row.uid;
      if (id <= last) return 0;
      n += 1;
      last = id;
      putUid.run(address, id, n);
      return n;
    });
    if (complete) {
      const first = uids.find((u) => u > 0);
      if (first !== undefined) pruneBelow.run(address, first);
      else dropUids.run(address);
    }
    putBox.run(address, box.validity, n, last, Math.max(box.keep_until, keepUntil));
    return { validity: box.validity, uids, next: n + 1 };
  });

  return (address: string, ids: readonly string[], complete: boolean, keepUntil: number, now: number): Numbering => run(address, ids, complete, keepUntil, now);
}
