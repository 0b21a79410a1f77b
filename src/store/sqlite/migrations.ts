// Versioned schema migrations, applied in order inside one transaction each; PRAGMA user_version
// records the last applied one.
export const MIGRATIONS: string[] = [
  `
  CREATE TABLE emails (
    id              TEXT PRIMARY KEY,       -- UUIDv7, strictly increasing in arrival order
    address         TEXT NOT NULL,          -- lowercase inbox address
    sender          TEXT NOT NULL,
    mailed_by       TEXT,
    subject         TEXT NOT NULL,
    to_header       TEXT NOT NULL,
    cc_header       TEXT NOT NULL,
    message_id      TEXT,
    headers_json    TEXT NOT NULL,
    text_body       TEXT,
    html_body       TEXT,
    attachment_count INTEGER NOT NULL,
    received_at     INTEGER NOT NULL,       -- epoch ms
    expires_at      INTEGER NOT NULL        -- epoch ms; reads filter on it, the sweeper deletes
  ) WITHOUT ROWID;
  CREATE INDEX emails_by_address ON emails(address, id);
  CREATE INDEX emails_by_expiry ON emails(expires_at);

  -- attachment bytes live apart from the email row, so lists and reads never load them
  CREATE TABLE attachments (
    email_id      TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    position      INTEGER NOT NULL,
    filename      TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    size_bytes    INTEGER NOT NULL,
    content       BLOB NOT NULL,
    PRIMARY KEY (email_id, id)
  );

  CREATE TABLE api_keys (
    hash          TEXT PRIMARY KEY,         -- SHA-256 of the raw key; the key itself is never stored
    prefix        TEXT NOT NULL,
    label         TEXT NOT NULL,
    contact_email TEXT,
    created_at    INTEGER NOT NULL,
    created_ip    TEXT NOT NULL,            -- bucket string of the minting IP (3 per IP per 24 h)
    revoked_at    INTEGER
  );
  CREATE INDEX api_keys_by_ip ON api_keys(created_ip, created_at);
  CREATE INDEX api_keys_by_prefix ON api_keys(prefix);
  `,
  // 2: each message stored once, as received; one small row per recipient references it. Mail of
  // version 1 cannot be converted (its received bytes were never kept): an upgrade starts empty
  // (docs/decisions.md "Upgrading the store").
  `
  DROP TABLE attachments;
  DROP TABLE emails;

  CREATE TABLE messages (
    key         TEXT PRIMARY KEY,            -- the id of its first row
    raw         BLOB NOT NULL,               -- as received, parts over 5 MB cut out
    expires_at  INTEGER NOT NULL,            -- the latest expiry of its rows
    views       TEXT                         -- derived views (JSON), null until first derived
  );
  CREATE INDEX messages_by_expiry ON messages(expires_at);

  -- decoded attachment bytes, written with the views; never loaded by lists or reads
  CREATE TABLE message_parts (
    message_key TEXT NOT NULL REFERENCES messages(key) ON DELETE CASCADE,
    n           INTEGER NOT NULL,
    content     BLOB NOT NULL,
    PRIMARY KEY (message_key, n)
  );

  CREATE TABLE emails (
    id              TEXT PRIMARY KEY,       -- UUIDv7, strictly increasing in arrival order
    address         TEXT NOT NULL,          -- lowercase inbox address
    message_key     TEXT NOT NULL,          -- messages.key
    sender          TEXT NOT NULL,
    mailed_by       TEXT,
    subject         TEXT NOT NULL,
    has_attachments INTEGER NOT NULL,
    received_at     INTEGER NOT NULL,       -- epoch ms
    expires_at      INTEGER NOT NULL        -- epoch ms; reads filter on it, the sweeper deletes
  ) WITHOUT ROWID;
  CREATE INDEX emails_by_address ON emails(address, id);
  CREATE INDEX emails_by_expiry ON emails(expires_at);
  CREATE INDEX emails_by_message ON emails(message_key);

  -- the last row of a message frees it (delete, purge and sweep alike)
  CREATE TRIGGER emails_free_message AFTER DELETE ON emails
  WHEN NOT EXISTS (SELECT 1 FROM emails WHERE message_key = OLD.message_key)
  BEGIN
    DELETE FROM messages WHERE key = OLD.message_key;
  END;
  `,
  // 3: webhooks owned by a key, their durable delivery queue and the log of recent attempts
  `
  CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY,
    key_hash    TEXT NOT NULL,               -- api_keys.hash of the owner
    url         TEXT NOT NULL,
    target      TEXT NOT NULL,               -- an address or *@domain
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
  );
  CREATE INDEX webhooks_by_key ON webhooks(key_hash, created_at);
  CREATE INDEX webhooks_by_target ON webhooks(target);

  CREATE TABLE webhook_jobs (
    id          TEXT PRIMARY KEY,            -- the webhook-id header
    webhook_id  TEXT NOT NULL,
    email_id    TEXT NOT NULL,
    payload     TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    leased      INTEGER NOT NULL DEFAULT 0,  -- 1 while a delivery runs; cleared when the process starts
    expires_at  INTEGER NOT NULL
  );
  CREATE INDEX webhook_jobs_by_due ON webhook_jobs(due_at);
  CREATE INDEX webhook_jobs_by_webhook ON webhook_jobs(webhook_id);

  CREATE TABLE webhook_attempts (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id  TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    email_id    TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status      TEXT NOT NULL,
    response_code INTEGER,
    error       TEXT,
    next_retry_at INTEGER
  );
  CREATE INDEX webhook_attempts_by_webhook ON webhook_attempts(webhook_id, seq);
  CREATE INDEX webhook_attempts_by_time ON webhook_attempts(at);
  `,
  // 4: each message's search text (domain/search.ts), made at ingest; none for mail stored before
  // (such a message gets one in the background when a search meets it: docs/decisions.md "Body search").
  // A table of its own, not a column of messages: a column after \`raw\` is reached only through the
  // overflow pages of the whole message (2 MB read to find 32 KB). Kept as UTF-8 bytes (a BLOB): a
  // search is instr() over bytes inside SQLite, with no string made per message on the main thread.
  `
  CREATE TABLE message_search (
    message_key TEXT PRIMARY KEY REFERENCES messages(key) ON DELETE CASCADE,
    text        BLOB NOT NULL                -- UTF-8, lowercase, at most 32,768 characters
  );
  `,
  // 5 (issue 26): domains added at run time (EPHEMAIL_DOMAINS are not stored) and when each API key
  // was last used. Self-contained (IF NOT EXISTS, tables of its own, no other table altered), so it
  // applies cleanly in whatever position a merge of migrations gives it.
  `
  CREATE TABLE IF NOT EXISTS domains (
    domain      TEXT PRIMARY KEY,            -- lowercase
    added_at    INTEGER NOT NULL,            -- epoch ms; the latest add (an add after a retire renews it)
    retired_at  INTEGER                      -- epoch ms; null while active
  );

  -- apart from api_keys: a use is recorded at most once a minute per key and node (services/keys.ts)
  CREATE TABLE IF NOT EXISTS api_key_use (
    hash          TEXT PRIMARY KEY,          -- api_keys.hash
    last_used_at  INTEGER NOT NULL           -- epoch ms
  );
  `,
  // 6: an event's body stored once per email, not once per job; jobs carry their key (events pending
  // are capped per key and per webhook) and are swept by expiry (docs/push.md "Limits")
  `
  CREATE TABLE webhook_payloads (
    email_id    TEXT PRIMARY KEY,
    payload     TEXT NOT NULL,               -- the event's JSON body, the same for every webhook
    expires_at  INTEGER NOT NULL             -- the email's; the body goes with its last job
  );
  INSERT OR IGNORE INTO webhook_payloads (email_id, payload, expires_at) SELECT email_id, payload, expires_at FROM webhook_jobs;

  CREATE TABLE webhook_jobs_4 (
    id          TEXT PRIMARY KEY,            -- the webhook-id header
    webhook_id  TEXT NOT NULL,
    key_hash    TEXT NOT NULL,               -- the webhook's key (per-key cap)
    email_id    TEXT NOT NULL,               -- webhook_payloads.email_id
    attempts    INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    leased      INTEGER NOT NULL DEFAULT 0,  -- 1 while a delivery runs; cleared when the process starts
    expires_at  INTEGER NOT NULL             -- never claimed after this; the sweep deletes it
  );
  INSERT INTO webhook_jobs_4 (id, webhook_id, key_hash, email_id, attempts, due_at, leased, expires_at)
    SELECT j.id, j.webhook_id, coalesce(w.key_hash, ''), j.email_id, j.attempts, j.due_at, j.leased, j.expires_at
    FROM webhook_jobs j LEFT JOIN webhooks w ON w.id = j.webhook_id;
  DROP TABLE webhook_jobs;
  ALTER TABLE webhook_jobs_4 RENAME TO webhook_jobs;
  CREATE INDEX webhook_jobs_by_due ON webhook_jobs(due_at);
  CREATE INDEX webhook_jobs_by_webhook ON webhook_jobs(webhook_id);
  CREATE INDEX webhook_jobs_by_key ON webhook_jobs(key_hash);
  CREATE INDEX webhook_jobs_by_email ON webhook_jobs(email_id);
  CREATE INDEX webhook_jobs_by_expiry ON webhook_jobs(expires_at);

  -- the last job of an email frees its body (delivered, given up, deleted with its webhook, swept)
  CREATE TRIGGER webhook_jobs_free_payload AFTER DELETE ON webhook_jobs
  WHEN NOT EXISTS (SELECT 1 FROM webhook_jobs WHERE email_id = OLD.email_id)
  BEGIN
    DELETE FROM webhook_payloads WHERE email_id = OLD.email_id;
  END;
  `,
  // 7 (issue 25): SMTP faults on demand, per address (docs/faults.md). Self-contained like 5.
  // seq keeps creation order; remaining NULL = unlimited. Used at RCPT by (address, expires_at).
  `
  CREATE TABLE IF NOT EXISTS smtp_faults (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT NOT NULL UNIQUE,      -- flt_…
    key_hash       TEXT NOT NULL,             -- api_keys.hash
    address        TEXT NOT NULL,             -- lowercase
    stage          TEXT NOT NULL,             -- 'rcpt' | 'data'
    reply          TEXT,                      -- '451 4.7.1 …', or NULL for a delay or a disconnect
    delay_seconds  INTEGER,
    disconnect     INTEGER NOT NULL DEFAULT 0,
    times          INTEGER,
    remaining      INTEGER,
    created_at     INTEGER NOT NULL,          -- epoch ms
    expires_at     INTEGER NOT NULL           -- epoch ms
  );
  CREATE INDEX IF NOT EXISTS smtp_faults_by_address ON smtp_faults(address, expires_at);
  CREATE INDEX IF NOT EXISTS smtp_faults_by_key ON smtp_faults(key_hash, expires_at);
  CREATE INDEX IF NOT EXISTS smtp_faults_by_expiry ON smtp_faults(expires_at);
  `,
  // 8 (issue 25): what the authentication checks need from the SMTP session (client IP, HELO name,
  // MAIL FROM: JSON), kept at ingest, and the verdicts once computed. A table of its own (like 4 and
  // 5, self-contained), freed with its message.
  `
  CREATE TABLE IF NOT EXISTS message_auth (
    message_key TEXT PRIMARY KEY REFERENCES messages(key) ON DELETE CASCADE,
    envelope    TEXT,                        -- JSON {clientIp, helo, mailFrom}; null when not over SMTP
    verdicts    TEXT                         -- JSON (services/authentication.ts), null until computed
  );
  `,
];

/** Statements shared by the main connection and the writer thread. */
export const SQL = {
  insertMessage: 'INSERT INTO messages (key, raw, expires_at) VALUES (?, ?, ?)',
  insertSearch: 'INSERT OR IGNORE INTO message_search (message_key, text) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)',
  insertEmail: `INSERT INTO emails (id, address, message_key, sender, mailed_by, subject, has_attachments, received_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  setViews: 'UPDATE messages SET views = ? WHERE key = ?',
  insertAuth: 'INSERT OR IGNORE INTO message_auth (message_key, envelope) VALUES (?, ?)',
  setAuth: `INSERT INTO message_auth (message_key, verdicts) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)
      ON CONFLICT(message_key) DO UPDATE SET verdicts = excluded.verdicts`,
  clearParts: 'DELETE FROM message_parts WHERE message_key = ?',
  insertPart: 'INSERT INTO message_parts (message_key, n, content) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE key = ?)',
  sweepEmails: 'DELETE FROM emails WHERE id IN (SELECT id FROM emails WHERE expires_at <= ? LIMIT ?)',
  sweepMessages: 'DELETE FROM messages WHERE key IN (SELECT key FROM messages WHERE expires_at <= ? LIMIT ?)',
};
