// The SQLite Store (better-sqlite3, WAL). One process owns the file; writes are synchronous and
// durable (synchronous=FULL) before addEmails resolves.
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
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

const INSERT_EMAIL = `INSERT INTO emails (id, address, sender, mailed_by, subject, to_header, cc_header, message_id,
      headers_json, text_body, html_body, attachment_count, received_at, expires_at)
      VALUES (@id, @address, @sender, @mailedBy, @subject, @to, @cc, @messageId, @headersJson, @textBody, @htmlBody,
      @attachmentCount, @receivedAt, @expiresAt)`;
const INSERT_ATTACHMENT = `INSERT INTO attachments (email_id, id, position, filename, content_type, size_bytes, content)
      VALUES (?, ?, ?, ?, ?, ?, ?)`;

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

// Captured at load: a test's fake timers must not stall durable writes.
const nextTurn = globalThis.setImmediate;
const MAX_BATCH = 512;
const toBuffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** One email's insert parameters: the emails row and its attachments rows. */
interface EmailRows {
  email: Record<string, unknown>;
  attachments: [string, string, number, string, string, number, Uint8Array][];
}

/** Per database: resolves once no commit is in flight (close() waits for it). */
const commitsDone = new WeakMap<Database.Database, () => Promise<void>>();

// The commit thread: its own connection, inserting batches of rows and committing them, so the
// fsync of synchronous=FULL blocks it and not the event loop. Plain JavaScript: nothing to compile.
const WRITER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
const insertEmail = db.prepare(workerData.insertEmail);
const insertAttachment = db.prepare(workerData.insertAttachment);
const one = db.transaction((rows) => {
  for (const r of rows) {
    insertEmail.run(r.email);
    for (const a of r.attachments) insertAttachment.run(a[0], a[1], a[2], a[3], a[4], a[5], Buffer.from(a[6].buffer, a[6].byteOffset, a[6].byteLength));
  }
});
const errorOf = (e) => ({ message: String(e && e.message || e), code: e && e.code });
const batch = db.transaction((calls) => calls.map((rows) => {
  try { one(rows); return null; } catch (e) { if (!db.inTransaction) throw e; return errorOf(e); }
}));
parentPort.on('message', (m) => {
  if (m.close) {
    db.close();
    parentPort.close();
    return;
  }
  try { parentPort.postMessage({ seq: m.seq, errors: batch(m.calls) }); }
  catch (e) { parentPort.postMessage({ seq: m.seq, failed: errorOf(e) }); }
});
parentPort.postMessage({ ready: true });
`;

const asError = (e: { message: string; code?: string }) => Object.assign(new Error(e.message), e.code ? { code: e.code } : {});

/**
 * Group commit: addEmails calls share one transaction (one fsync instead of one each), each call in
 * its own savepoint so a failing call fails alone and stays all-or-none. Every promise settles only
 * after the shared COMMIT returned, so a 250 still means durable. Calls keep their order, and so do
 * their ids (assigned here, in call order; batches commit one after another).
 * With a file database the commits run on a writer thread with its own connection, while the next
 * batch gathers; until that thread is up (and for `:memory:`) they run here, one turn of the event
 * loop per batch.
 */
function groupCommit(
  db: Database.Database,
  add: (emails: NewEmail[]) => EmailSummary[],
  file: { path: string; toRows: (emails: NewEmail[]) => { rows: EmailRows[]; summaries: EmailSummary[] } } | null,
  /** Called for every call's emails once its fate is known (committed, failed or unknown), before it settles. */
  changed: (emails: NewEmail[]) => void,
): (emails: NewEmail[]) => Promise<EmailSummary[]> {
  interface Job { emails: NewEmail[]; resolve: (s: EmailSummary[]) => void; reject: (e: unknown) => void }
  type Outcome = { ok: true; value: EmailSummary[] } | { ok: false; err: unknown };
  let queue: Job[] = [];
  let scheduled = false;
  const unavailable = (err: unknown) => (db.open ? err : new StoreUnavailableError('the SQLite database is closed', { cause: err }));

  // ---- the writer thread (file databases), started on the first write ----
  let writer: Worker | null = null;
  let writerReady = false;
  let writerDead = !file;
  let inFlight: { seq: number; jobs: Job[]; summaries: EmailSummary[][] } | null = null;
  let seq = 0;
  let idle: (() => void)[] = [];
  const settleIdle = () => {
    if (inFlight || queue.length) return;
    for (const f of idle) f();
    idle = [];
  };
  commitsDone.set(db, () => {
    writerDead = true; // closing: what is queued now commits here, the thread stops
    return new Promise<void>((resolve) => {
      idle.push(() => {
        const w = writer;
        writer = null;
        if (!w) return resolve();
        // the thread closes its connection and ends; terminated if it does not within a second
        const t = setTimeout(() => void w.terminate(), 1000);
        w.once('exit', () => {
          clearTimeout(t);
          resolve();
        });
        w.postMessage({ close: true });
      });
      if (!inFlight && queue.length) flush();
      settleIdle();
    });
  });
  const startWriter = () => {
    if (writer || writerDead || !file) return;
    try {
      const w = new Worker(WRITER, {
        eval: true,
        workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), path: file.path, insertEmail: INSERT_EMAIL, insertAttachment: INSERT_ATTACHMENT },
      });
      writer = w;
      w.unref();
      w.on('message', (m: { ready?: true; seq?: number; errors?: ({ message: string; code?: string } | null)[]; failed?: { message: string; code?: string } }) => {
        if (m.ready) {
          writerReady = true;
          return;
        }
        const batch = inFlight;
        if (!batch || batch.seq !== m.seq) return;
        inFlight = null;
        batch.jobs.forEach((job, i) => {
          changed(job.emails);
          const e = m.failed ?? m.errors?.[i];
          if (e) job.reject(asError(e));
          else job.resolve(batch.summaries[i]);
        });
        if (queue.length) flush();
        else settleIdle();
      });
      const down = (err: unknown) => {
        if (writer !== w) return;
        writer = null;
        writerDead = true; // commit here from now on
        const batch = inFlight;
        inFlight = null;
        // not known to be committed: a temporary failure, the sender retries
        for (const job of batch?.jobs ?? []) changed(job.emails);
        for (const job of batch?.jobs ?? []) job.reject(new StoreUnavailableError('the SQLite writer thread stopped', { cause: err }));
        if (queue.length) schedule();
        else settleIdle();
      };
      w.on('error', down);
      w.on('exit', (code) => down(new Error(`writer thread exited with code ${code}`)));
    } catch {
      writerDead = true;
    }
  };

  const flush = () => {
    scheduled = false;
    if (inFlight) return; // the reply of the batch in flight flushes again
    const jobs = queue.length > MAX_BATCH ? queue.splice(0, MAX_BATCH) : queue;
    queue = jobs === queue ? [] : queue;
    if (jobs.length === 0) return settleIdle();
    if (writer && writerReady && !writerDead && db.open) {
      const calls: EmailRows[][] = [];
      const summaries: EmailSummary[][] = [];
      for (const job of jobs) {
        const r = file!.toRows(job.emails);
        calls.push(r.rows);
        summaries.push(r.summaries);
      }
      inFlight = { seq: ++seq, jobs, summaries };
      writer.postMessage({ seq, calls });
      return;
    }
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
      for (const job of jobs) changed(job.emails);
      for (const job of jobs) job.reject(unavailable(err));
      return settleIdle();
    }
    jobs.forEach((job, i) => {
      changed(job.emails);
      const o = outcomes[i];
      if (o.ok) job.resolve(o.value);
      else job.reject(unavailable(o.err));
    });
    settleIdle();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    nextTurn(flush);
  };
  return (emails) =>
    new Promise<EmailSummary[]>((resolve, reject) => {
      if (!db.open) return reject(new StoreUnavailableError('the SQLite database is closed'));
      startWriter();
      queue.push({ emails, resolve, reject });
      if (!inFlight) schedule();
    });
}

/**
 * Recent listEmails results per address, so that pollers and woken long-polls repeating the same
 * query do not each read the rows again. Exact, not approximate: an entry answers only a `now` at or
 * after the one it was read at, before any of its emails expires, within a second; every write that
 * can change an address's list forgets it (this process is the only writer of emails: the store is
 * not shared across processes).
 */
function createListCache() {
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
function createEmailCache() {
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
