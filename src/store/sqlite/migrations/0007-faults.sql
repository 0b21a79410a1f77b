-- 7 (issue 25): SMTP faults on demand, per address (docs/faults.md). Self-contained like 5.
-- seq keeps creation order; remaining NULL = unlimited. Used at RCPT by (address, expires_at).
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
