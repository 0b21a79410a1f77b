// The SQLite Store (better-sqlite3, WAL). One process owns the file; addEmails resolves only after
// its group commit (group-commit.ts, synchronous=FULL) is on disk; reads go through exact caches (caches.ts).
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { createIdGenerator } from '../../domain/ids.ts';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { createEmailCache, createListCache } from './caches.ts';
import { commitsDone, groupCommit, toBuffer, type EmailRows } from './group-commit.ts';
import { INSERT_ATTACHMENT, INSERT_EMAIL, MIGRATIONS } from './migrations.ts';
import type {
  AttachmentContent, AttachmentMeta, EmailFull, EmailSummary, KeyRecord, ListQuery, MintResult, NewEmail, NewKey, Store,
} from '../store.ts';

const CHUNK = 256 * 1024;

interface EmailRow {
  id: string;
  address: string;
  sender: string;
  mailed_by: string | null;
  subject: string;
  attachment_count: number;
  received_at: number;
  expires_at: number;
}
interface FullRow extends EmailRow {
  to_header: string;
  cc_header: string;
  message_id: string | null;
  headers_json: string;
  text_body: string | null;
  html_body: string | null;
}
interface KeyRow {
  hash: string;
  prefix: string;
  label: string;
  contact_email: string | null;
  created_at: number;
  revoked_at: number | null;
}

const SUMMARY_COLS = 'id, address, sender, mailed_by, subject, attachment_count, received_at, expires_at';

const toSummary = (r: EmailRow): EmailSummary => ({
  id: r.id,
  address: r.address,
  sender: r.sender,
  mailedBy: r.mailed_by,
  subject: r.subject,
  hasAttachments: r.attachment_count > 0,
  receivedAt: r.received_at,
  expiresAt: r.expires_at,
});
const toKey = (r: KeyRow): KeyRecord => ({
  hash: r.hash,
  prefix: r.prefix,
  label: r.label,
  contactEmail: r.contact_email,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});
const toMeta = (r: { id: string; filename: string; content_type: string; size_bytes: number }): AttachmentMeta => ({
  id: r.id,
  filename: r.filename,
  contentType: r.content_type,
  sizeBytes: r.size_bytes,
});

/** Opens (creating if needed) the database at `path` (`:memory:` for a private in-memory one). */
export function createSqliteStore(path: string, options: { random?: () => number } = {}): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL'); // readers never block the writer
  db.pragma('synchronous = FULL'); // a commit is on disk before addEmails resolves: a 250 is never lost, even on power loss
  db.pragma('foreign_keys = ON'); // deleting an email deletes its attachments
  db.pragma('busy_timeout = 5000'); // the operator CLI may hold the write lock briefly
  migrate(db);

  const last = db.prepare('SELECT max(id) AS id FROM emails').get() as { id: string | null };
  const ids = createIdGenerator(options.random, last.id ?? undefined);

  const q = {
    insertEmail: db.prepare(INSERT_EMAIL),
    insertAttachment: db.prepare(INSERT_ATTACHMENT),
    listNewest: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND expires_at > ? ORDER BY id DESC LIMIT ?`),
    listBefore: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND id < ? AND expires_at > ? ORDER BY id DESC LIMIT ?`),
    listSince: db.prepare(`SELECT ${SUMMARY_COLS} FROM emails WHERE address = ? AND id > ? AND expires_at > ? ORDER BY id ASC LIMIT ?`),
    hasEmails: db.prepare('SELECT 1 FROM emails WHERE address = ? AND expires_at > ? LIMIT 1'),
    getEmail: db.prepare('SELECT * FROM emails WHERE id = ? AND expires_at > ?'),
    liveEmail: db.prepare('SELECT 1 FROM emails WHERE id = ? AND expires_at > ?'),
    listAttachments: db.prepare('SELECT id, filename, content_type, size_bytes FROM attachments WHERE email_id = ? ORDER BY position'),
    getAttachment: db.prepare('SELECT id, filename, content_type, size_bytes FROM attachments WHERE email_id = ? AND id = ?'),
    chunk: db.prepare('SELECT substr(content, ?, ?) AS bytes FROM attachments WHERE email_id = ? AND id = ?'),
    deleteEmail: db.prepare('DELETE FROM emails WHERE id = ? AND expires_at > ?'),
    purgeLive: db.prepare('DELETE FROM emails WHERE address = ? AND expires_at > ?'),
    purgeAll: db.prepare('DELETE FROM emails WHERE address = ?'),
    sweep: db.prepare('DELETE FROM emails WHERE expires_at <= ?'),
    mintsSince: db.prepare('SELECT created_at FROM api_keys WHERE created_ip = ? AND created_at > ? ORDER BY created_at ASC'),
    insertKey: db.prepare(`INSERT INTO api_keys (hash, prefix, label, contact_email, created_at, created_ip, revoked_at)
      VALUES (?, ?, ?, ?, ?, ?, NULL)`),
    findKey: db.prepare('SELECT * FROM api_keys WHERE hash = ?'),
    listKeys: db.prepare('SELECT * FROM api_keys ORDER BY created_at ASC, prefix ASC'),
    revokable: db.prepare("SELECT * FROM api_keys WHERE substr(prefix, 1, length(?)) = ? AND revoked_at IS NULL"),
    revoke: db.prepare('UPDATE api_keys SET revoked_at = ? WHERE hash = ?'),
    ping: db.prepare('SELECT 1'),
    dataVersion: db.prepare('PRAGMA data_version').pluck(),
  };

  const lists = createListCache();
  const keys = new Map<string, KeyRecord>();
  let keysVersion = -1;
  const emails = createEmailCache();

  /** Assigns ids (in input order) and builds the rows to insert. */
  const toRows = (emails: NewEmail[]): { rows: EmailRows[]; summaries: EmailSummary[] } => {
    const rows: EmailRows[] = [];
    const summaries = emails.map((e): EmailSummary => {
      const id = ids.next(e.receivedAt);
      rows.push({
        email: {
          id,
          address: e.address,
          sender: e.sender,
          mailedBy: e.mailedBy,
          subject: e.subject,
          to: e.to,
          cc: e.cc,
          messageId: e.messageId,
          headersJson: JSON.stringify(e.headers),
          textBody: e.textBody,
          htmlBody: e.htmlBody,
          attachmentCount: e.attachments.length,
          receivedAt: e.receivedAt,
          expiresAt: e.expiresAt,
        },
        attachments: e.attachments.map((a, i) => [id, String(i + 1), i, a.filename, a.contentType, a.content.byteLength, a.content]),
      });
      return {
        id,
        address: e.address,
        sender: e.sender,
        mailedBy: e.mailedBy,
        subject: e.subject,
        hasAttachments: e.attachments.length > 0,
        receivedAt: e.receivedAt,
        expiresAt: e.expiresAt,
      };
    });
    return { rows, summaries };
  };
  const addEmails = db.transaction((emails: NewEmail[]): EmailSummary[] => {
    const { rows, summaries } = toRows(emails);
    for (const r of rows) {
      q.insertEmail.run(r.email);
      for (const a of r.attachments) q.insertAttachment.run(...a.slice(0, 6), toBuffer(a[6] as Uint8Array));
    }
    return summaries;
  });

  const mint = db.transaction((key: NewKey, ip: string, max: number, windowMs: number, now: number): MintResult => {
    const recent = q.mintsSince.all(ip, now - windowMs) as { created_at: number }[];
    if (recent.length >= max) {
      const freesAt = recent[recent.length - max].created_at + windowMs;
      return { ok: false, retryAfterMs: Math.max(1, freesAt - now) };
    }
    q.insertKey.run(key.hash, key.prefix, key.label, key.contactEmail, key.createdAt, ip);
    return { ok: true };
  });

  const revoke = db.transaction((prefix: string, now: number): KeyRecord[] => {
    const rows = (q.revokable.all(prefix, prefix) as KeyRow[]).map(toKey);
    for (const r of rows) q.revoke.run(now, r.hash);
    return rows.map((r) => ({ ...r, revokedAt: now }));
  });

  // Every backend error is an infrastructure fault; the callers map it to 500/451.
  const guard = <T>(fn: () => T): Promise<T> => {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(db.open ? err : new StoreUnavailableError('the SQLite database is closed', { cause: err }));
    }
  };

  async function* readChunks(emailId: string, attachmentId: string, size: number): AsyncIterable<Uint8Array> {
    for (let offset = 0; offset < size; offset += CHUNK) {
      const row = q.chunk.get(offset + 1, CHUNK, emailId, attachmentId) as { bytes: Buffer } | undefined;
      if (!row || !row.bytes?.length) return; // deleted while streaming
      yield row.bytes;
    }
  }

  return {
    capabilities: { sharedAcrossProcesses: false, orderedAcrossInboxes: true },
    addEmails: groupCommit(db, addEmails, path === ':memory:' ? null : { path, toRows }, (emails) => {
      for (const e of emails) lists.forget(e.address);
    }),
    listEmails: (address: string, query: ListQuery, now: number) =>
      guard(() => {
        const key = `${query.since ? `s${query.since.toLowerCase()}` : query.before ? `b${query.before.toLowerCase()}` : ''}:${query.limit}`;
        const hit = lists.get(address, key, now);
        if (hit) return hit;
        const rows = query.since
          ? q.listSince.all(address, query.since.toLowerCase(), now, query.limit)
          : query.before
            ? q.listBefore.all(address, query.before.toLowerCase(), now, query.limit)
            : q.listNewest.all(address, now, query.limit);
        const out = (rows as EmailRow[]).map(toSummary);
        lists.put(address, key, now, out);
        return out;
      }),
    hasEmails: (address, now) => guard(() => q.hasEmails.get(address, now) !== undefined),
    getEmail: (id, now) =>
      guard((): EmailFull | null => {
        const hit = emails.get(id.toLowerCase(), now);
        if (hit) return hit;
        const r = q.getEmail.get(id.toLowerCase(), now) as FullRow | undefined;
        if (!r) return null;
        return emails.put({
          ...toSummary(r),
          to: r.to_header,
          cc: r.cc_header,
          messageId: r.message_id,
          headers: JSON.parse(r.headers_json),
          textBody: r.text_body,
          htmlBody: r.html_body,
          attachments: r.attachment_count > 0 ? (q.listAttachments.all(r.id) as any[]).map(toMeta) : [],
        });
      }),
    listAttachments: (emailId, now) =>
      guard(() => {
        const id = emailId.toLowerCase();
        if (!q.liveEmail.get(id, now)) return null;
        return (q.listAttachments.all(id) as any[]).map(toMeta);
      }),
    getAttachment: (emailId, attachmentId, now) =>
      guard((): AttachmentContent | null => {
        const id = emailId.toLowerCase();
        if (!q.liveEmail.get(id, now)) return null;
        const r = q.getAttachment.get(id, attachmentId) as any;
        if (!r) return null;
        const meta = toMeta(r);
        return { meta, chunks: readChunks(id, attachmentId, meta.sizeBytes) };
      }),
    deleteEmail: (id, now) => guard(() => {
      lists.clear();
      emails.forget(id.toLowerCase());
      return q.deleteEmail.run(id.toLowerCase(), now).changes > 0;
    }),
    purgeInbox: (address, now) =>
      guard(() =>
        db.transaction(() => {
          lists.forget(address);
          emails.clear();
          const live = q.purgeLive.run(address, now).changes;
          q.purgeAll.run(address);
          return live;
        })(),
      ),
    sweepExpired: (now) => guard(() => {
      const n = q.sweep.run(now).changes;
      if (n > 0) {
        lists.clear();
        emails.clear();
      }
      return n;
    }),
    mintKey: (key, ip, max, windowMs, now) => guard(() => mint(key, ip, max, windowMs, now)),
    findKey: (hash) => guard(() => {
      // a key found before answers again while no other connection (the operator's CLI revoking
      // keys, the writer thread) committed anything since: SQLite's data_version says so exactly
      const version = q.dataVersion.get() as number;
      if (version !== keysVersion) {
        keys.clear();
        keysVersion = version;
      }
      const known = keys.get(hash);
      if (known) return { ...known };
      const r = q.findKey.get(hash) as KeyRow | undefined;
      if (!r) return null;
      if (keys.size >= 10_000) keys.clear();
      keys.set(hash, toKey(r));
      return toKey(r);
    }),
    listKeys: () => guard(() => (q.listKeys.all() as KeyRow[]).map(toKey)),
    revokeKeys: (prefix, now) => guard(() => {
      keys.clear();
      return revoke(prefix, now);
    }),
    ping: () => guard(() => void q.ping.get()),
    async close() {
      await commitsDone.get(db)?.();
      if (db.open) db.close();
    },
  };
}

function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  for (let v = version; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}
