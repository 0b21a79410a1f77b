-- 1: the first schema
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
