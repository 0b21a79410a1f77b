-- 6: an event's body stored once per email, not once per job; jobs carry their key (events pending
-- are capped per key and per webhook) and are swept by expiry (docs/push.md "Limits")
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
