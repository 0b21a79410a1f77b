-- 3: webhooks owned by a key, their durable delivery queue and the log of recent attempts
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
