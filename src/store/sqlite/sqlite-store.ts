// The SQLite Store (better-sqlite3, WAL). One process owns the file; writes are synchronous and
// durable (synchronous=FULL) before addEmails resolves.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { createIdGenerator } from '../../domain/ids.ts';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { MIGRATIONS } from './migrations.ts';
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
    insertEmail: db.prepare(`INSERT INTO emails (id, address, sender, mailed_by, subject, to_header, cc_header, message_id,
      headers_json, text_body, html_body, attachment_count, received_at, expires_at)
      VALUES (@id, @address, @sender, @mailedBy, @subject, @to, @cc, @messageId, @headersJson, @textBody, @htmlBody,
      @attachmentCount, @receivedAt, @expiresAt)`),
    insertAttachment: db.prepare(`INSERT INTO attachments (email_id, id, position, filename, content_type, size_bytes, content)
      VALUES (?, ?, ?, ?, ?, ?, ?)`),
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
  };

  const addEmails = db.transaction((emails: NewEmail[]): EmailSummary[] => {
    return emails.map((e) => {
      const id = ids.next(e.receivedAt);
      q.insertEmail.run({
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
      });
      e.attachments.forEach((a, i) => {
        q.insertAttachment.run(id, String(i + 1), i, a.filename, a.contentType, a.content.byteLength, Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength));
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
    addEmails: groupCommit(db, addEmails),
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
      guard((): EmailFull | null => {
        const r = q.getEmail.get(id.toLowerCase(), now) as FullRow | undefined;
        if (!r) return null;
        return {
          ...toSummary(r),
          to: r.to_header,
          cc: r.cc_header,
          messageId: r.message_id,
          headers: JSON.parse(r.headers_json),
          textBody: r.text_body,
          htmlBody: r.html_body,
          attachments: r.attachment_count > 0 ? (q.listAttachments.all(r.id) as any[]).map(toMeta) : [],
        };
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
    deleteEmail: (id, now) => guard(() => q.deleteEmail.run(id.toLowerCase(), now).changes > 0),
    purgeInbox: (address, now) =>
      guard(() =>
        db.transaction(() => {
          const live = q.purgeLive.run(address, now).changes;
          q.purgeAll.run(address);
          return live;
        })(),
      ),
    sweepExpired: (now) => guard(() => q.sweep.run(now).changes),
    mintKey: (key, ip, max, windowMs, now) => guard(() => mint(key, ip, max, windowMs, now)),
    findKey: (hash) => guard(() => {
      const r = q.findKey.get(hash) as KeyRow | undefined;
      return r ? toKey(r) : null;
    }),
    listKeys: () => guard(() => (q.listKeys.all() as KeyRow[]).map(toKey)),
    revokeKeys: (prefix, now) => guard(() => revoke(prefix, now)),
    ping: () => guard(() => void q.ping.get()),
    async close() {
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

// Captured at load: a test's fake timers must not stall durable writes.
const nextTurn = globalThis.setImmediate;
const MAX_BATCH = 512;

/**
 * Group commit: addEmails calls made within one turn of the event loop share one transaction (one
 * fsync instead of one each), each call in its own savepoint so a failing call fails alone and
 * stays all-or-none. Every promise settles only after the shared COMMIT returned, so a 250 still
 * means durable. Calls keep their order, and so do their ids.
 */
function groupCommit(db: Database.Database, add: (emails: NewEmail[]) => EmailSummary[]): (emails: NewEmail[]) => Promise<EmailSummary[]> {
  interface Job { emails: NewEmail[]; resolve: (s: EmailSummary[]) => void; reject: (e: unknown) => void }
  type Outcome = { ok: true; value: EmailSummary[] } | { ok: false; err: unknown };
  let queue: Job[] = [];
  let scheduled = false;
  const unavailable = (err: unknown) => (db.open ? err : new StoreUnavailableError('the SQLite database is closed', { cause: err }));
  const flush = () => {
    scheduled = false;
    const jobs = queue.length > MAX_BATCH ? queue.splice(0, MAX_BATCH) : queue;
    queue = jobs === queue ? [] : queue;
    if (queue.length > 0) schedule();
    const outcomes: Outcome[] = [];
    try {
      db.transaction(() => {
        for (const job of jobs) {
          try {
            outcomes.push({ ok: true, value: add(job.emails) }); // nested: runs in a savepoint
          } catch (err) {
            if (!db.inTransaction) throw err; // SQLite rolled back the whole batch (disk full, I/O error)
            outcomes.push({ ok: false, err });
          }
        }
      })();
    } catch (err) {
      for (const job of jobs) job.reject(unavailable(err));
      return;
    }
    jobs.forEach((job, i) => {
      const o = outcomes[i];
      if (o.ok) job.resolve(o.value);
      else job.reject(unavailable(o.err));
    });
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    nextTurn(flush);
  };
  return (emails) =>
    new Promise<EmailSummary[]>((resolve, reject) => {
      queue.push({ emails, resolve, reject });
      schedule();
    });
}
