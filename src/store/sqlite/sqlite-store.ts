// The SQLite Store (better-sqlite3, WAL). One process owns the file. Each message is stored once
// (messages), each recipient gets a small row (emails) referencing it; a trigger frees a message
// with its last row. Writes go through the group commit (group-commit.ts, synchronous=FULL, on a
// writer thread); reads run here (read caching is one wrapper over any store: ../read-cache.ts).
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { createIdGenerator } from '../../domain/ids.ts';
import { createSecureRandom, type RandomSource } from '../../random.ts';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { typedStoreError } from './errors.ts';
import { groupCommit, type WriteJob } from './group-commit.ts';
import type { AddEvents } from './write-ops.ts';
import { bodyFor, type MailEvents } from '../webhooks.ts';
import { migrationSql } from './migrations.ts';
import { createSqliteDomains } from './domains.ts';
import { createSqliteWebhooks } from './webhooks.ts';
import { createSqliteFaults } from './faults.ts';
import { createSqliteKeys } from './keys.ts';
import type { EmailSummary } from '../../domain/summary.ts';
import { summaryOf, type ListQuery, type NewEmail, type Store, type StoredBytes, type StoredEmail, parseEnvelope, type StoredAuthentication } from '../store.ts';
import { applyPragmas } from './pragmas.ts';

const CHUNK = 256 * 1024;
/** Rows one sweep transaction deletes: a flood expiring never holds the writer for long. */
const SWEEP_BATCH = 2000;

interface EmailRow {
  id: string;
  address: string;
  message_key: string;
  sender: string;
  mailed_by: string | null;
  subject: string;
  has_attachments: number;
  received_at: number;
  expires_at: number;
}
const SUMMARY_COLS = 'id, address, sender, mailed_by, subject, has_attachments, received_at, expires_at';

const toSummary = (r: EmailRow): EmailSummary => ({
  id: r.id,
  address: r.address,
  sender: r.sender,
  mailedBy: r.mailed_by,
  subject: r.subject,
  hasAttachments: r.has_attachments !== 0,
  receivedAt: r.received_at,
  expiresAt: r.expires_at,
});
/** Opens (creating if needed) the database at `path` (`:memory:` for a private in-memory one). */
export function createSqliteStore(path: string, options: { random?: RandomSource } = {}): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  applyPragmas(db);
  migrate(db);

  const last = db.prepare('SELECT max(id) AS id FROM emails').get() as { id: string | null };
  const ids = createIdGenerator(options.random ?? createSecureRandom(), last.id ?? undefined);

  /** Raised by every delete of emails (Store.deletions): the read model's cue to read a row again. */
  let deletions = 0;
  const q = {
    listNewest: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND expires_at > ? ORDER BY id DESC LIMIT ?`),
    listBefore: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND id < ? AND expires_at > ? ORDER BY id DESC LIMIT ?`),
    listSince: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND id > ? AND expires_at > ? ORDER BY id ASC LIMIT ?`),
    hasEmails: db.prepare('SELECT 1 FROM emails WHERE address = ? AND expires_at > ? LIMIT 1'),
    // (both indexed on expires_at: the sweep asks the writer only when something expired)
    anyExpired: db.prepare('SELECT 1 FROM emails WHERE expires_at <= ? UNION ALL SELECT 1 FROM messages WHERE expires_at <= ? LIMIT 1'),
    getEmail: db.prepare('SELECT * FROM emails WHERE id = ? AND expires_at > ?'),
    rawSize: db.prepare('SELECT length(raw) AS n FROM messages WHERE key = ?').pluck(),
    rawChunk: db.prepare('SELECT substr(raw, ?, ?) FROM messages WHERE key = ?').pluck(),
    views: db.prepare('SELECT views FROM messages WHERE key = ?').pluck(),
    auth: db.prepare('SELECT a.envelope AS envelope, a.verdicts AS verdicts FROM messages m LEFT JOIN message_auth a ON a.message_key = m.key WHERE m.key = ?'),
    // ids as one JSON array (a batch is at most a page of a list)
    // instr() over the UTF-8 bytes, inside SQLite: no string per message is made on this thread
    matchText: db.prepare(`SELECT e.id AS id, CASE WHEN s.text IS NULL THEN NULL ELSE instr(s.text, ?) > 0 END AS hit
      FROM emails e LEFT JOIN message_search s ON s.message_key = e.message_key
      WHERE e.id IN (SELECT value FROM json_each(?)) AND e.expires_at > ?`),
    partSize: db.prepare('SELECT length(content) FROM message_parts WHERE message_key = ? AND n = ?').pluck(),
    partChunk: db.prepare('SELECT substr(content, ?, ?) FROM message_parts WHERE message_key = ? AND n = ?').pluck(),
    deleteEmail: db.prepare('DELETE FROM emails WHERE id = ? AND expires_at > ?'),
    purgeLive: db.prepare('DELETE FROM emails WHERE address = ? AND expires_at > ?'),
    purgeAll: db.prepare('DELETE FROM emails WHERE address = ?'),
    ping: db.prepare('SELECT 1'),
  };

  const writes = groupCommit(db, path === ':memory:' ? null : path);

  // Every backend error is an infrastructure fault; the callers map it to 500/451.
  const guard = <T>(fn: () => T): Promise<T> => {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(typedStoreError(err, db.open));
    }
  };

  function addEmails(emails: NewEmail[], events?: MailEvents): Promise<StoredEmail[]> {
    if (emails.length === 0) return Promise.resolve([]);
    // ids in input order; a message's key is the id of its first row, its expiry the latest of its rows
    const messages = new Map<Uint8Array, [string, Uint8Array, number, string | null, string | null]>();
    const rows: unknown[][] = [];
    const summaries = emails.map((e): StoredEmail => {
      const id = ids.next(e.receivedAt);
      let m = messages.get(e.raw);
      if (!m) messages.set(e.raw, (m = [id, e.raw, e.expiresAt, e.searchText ?? null, e.envelope ? JSON.stringify(e.envelope) : null]));
      else if (e.expiresAt > m[2]) m[2] = e.expiresAt;
      rows.push([id, e.address, m[0], e.sender, e.mailedBy, e.subject, e.hasAttachments ? 1 : 0, e.receivedAt, e.expiresAt]);
      return { ...summaryOf(id, e), messageKey: m[0] };
    });
    if (!events || events.jobs.length === 0) return writes.write({ kind: 'add', messages: [...messages.values()], emails: rows }).then(() => summaries);
    // the webhook events in the mail's transaction (ids are known here: assigned on this thread)
    const jobs = events.jobs.map((j) => ({ ...j, emailId: summaries[j.email].id }));
    const add: AddEvents = {
      jobs: jobs.map((j) => [j.id, j.webhookId, j.keyHash, j.emailId, j.dueAt, j.expiresAt]),
      bodies: [...events.bodies].map(([i, pieces]) => [summaries[i].id, bodyFor(pieces, summaries[i].id), emails[i].expiresAt]),
      caps: [events.caps.perKey, events.caps.perHook],
    };
    return writes.writeMail({ kind: 'add', messages: [...messages.values()], emails: rows, events: add }).then((refused) => {
      events.dropped = refused.map(([pos, reason]) => ({ job: (({ email: _e, ...j }) => j)(jobs[pos]), reason }));
      return summaries;
    });
  }

  /** A blob read in chunks as they are consumed; ends early when it is deleted meanwhile. */
  function bytes(size: number | undefined | null, chunk: (offset: number) => Buffer | null | undefined): StoredBytes | null {
    if (size == null) return null;
    async function* chunks(): AsyncIterable<Uint8Array> {
      for (let offset = 0; offset < size!; offset += CHUNK) {
        const b = chunk(offset);
        if (!b?.length) return;
        yield b;
      }
    }
    return { sizeBytes: size, chunks: chunks() };
  }

  const webhooks = createSqliteWebhooks(db, guard);
  const domains = createSqliteDomains(db, guard);
  const faults = createSqliteFaults(db, guard);
  const keys = createSqliteKeys(db, guard);

  return {
    capabilities: { sharedAcrossProcesses: false, orderedAcrossInboxes: true },
    webhooks,
    domains,
    faults,
    ...keys, // the key seam (keys.ts): one object implements every seam
    addEmails,
    listEmails: (address: string, query: ListQuery, now: number) =>
      guard(() => {
        const rows = query.since
          ? q.listSince.all(address, query.since.toLowerCase(), now, query.limit)
          : query.before
            ? q.listBefore.all(address, query.before.toLowerCase(), now, query.limit)
            : q.listNewest.all(address, now, query.limit);
        return (rows as EmailRow[]).map(toSummary);
      }),
    hasEmails: (address, now) => guard(() => q.hasEmails.get(address, now) !== undefined),
    getEmail: (id, now) =>
      guard((): StoredEmail | null => {
        const r = q.getEmail.get(id.toLowerCase(), now) as EmailRow | undefined;
        return r ? { ...toSummary(r), messageKey: r.message_key } : null;
      }),
    readRaw: (key) =>
      guard(() => bytes(q.rawSize.get(key) as number | undefined, (at) => q.rawChunk.get(at + 1, CHUNK, key) as Buffer | undefined)),
    getViews: (key) => guard(() => (q.views.get(key) as string | null | undefined) ?? null),
    putViews: (key, views, parts) => writes.write({ kind: 'views', key, views, parts }).then(() => undefined),
    getAuthentication: (key) =>
      guard((): StoredAuthentication | null => {
        const r = q.auth.get(key) as { envelope: string | null; verdicts: string | null } | undefined;
        return r ? { envelope: parseEnvelope(r.envelope), verdicts: r.verdicts } : null;
      }),
    // lazy: verdicts are computed in the background and nobody waits on their commit (group-commit.ts)
    putAuthentication: (key, verdicts) => writes.write({ kind: 'auth', key, verdicts }, { lazy: true }).then(() => undefined),
    matchText: (list, needle, now) =>
      guard(() => {
        if (list.length === 0) return [];
        const found = new Map<string, boolean | null>();
        for (const r of q.matchText.all(Buffer.from(needle, 'utf8'), JSON.stringify(list.map((id) => id.toLowerCase())), now) as { id: string; hit: number | null }[]) {
          found.set(r.id, r.hit === null ? null : r.hit === 1);
        }
        return list.map((id) => found.get(id.toLowerCase()) ?? null);
      }),
    putSearchText: (key, text) => writes.write({ kind: 'search', key, text }).then(() => undefined),
    readPart: (key, index) =>
      guard(() => bytes(q.partSize.get(key, index) as number | undefined, (at) => q.partChunk.get(at + 1, CHUNK, key, index) as Buffer | undefined)),
    deletions: () => deletions,
    // the count moves only when a row went: a delete of an unknown id (a 404) keeps every answer
    deleteEmail: (id, now) => guard(() => {
      const gone = q.deleteEmail.run(id.toLowerCase(), now).changes > 0;
      if (gone) deletions++;
      return gone;
    }),
    purgeInbox: (address, now) =>
      guard(() =>
        db.transaction(() => {
          // the live rows are the answer; expired ones not yet swept go too (and move the count alike)
          const live = q.purgeLive.run(address, now).changes;
          const expired = q.purgeAll.run(address).changes;
          if (live + expired > 0) deletions++;
          return live;
        })(),
      ),
    async sweepExpired(now) {
      // in batches on the writer thread: a flood expiring neither stalls the event loop nor the writer
      let removed = 0;
      const expired = await guard(() => q.anyExpired.get(now, now) !== undefined);
      for (; expired;) {
        const n = await writes.write({ kind: 'sweep', now, limit: SWEEP_BATCH } satisfies WriteJob);
        if (n > 0) deletions++; // (expired rows: a clock set back must not find them kept)
        removed += n;
        if (n < SWEEP_BATCH) break;
      }
      await webhooks.sweepExpired(now); // expired events with their bodies, and the delivery log's two hours
      await guard(() => faults.expireFaults(now)); // SMTP fault rules past their inbox TTL (indexed on expires_at)
      return removed;
    },
    ping: () => guard(() => void q.ping.get()),
    async close() {
      await writes.close();
      if (db.open) db.close();
    },
  };
}

function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  const migrations = migrationSql();
  for (let v = version; v < migrations.length; v++) {
    db.transaction(() => {
      db.exec(migrations[v]);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}
