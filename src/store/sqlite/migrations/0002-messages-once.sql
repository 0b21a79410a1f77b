-- 2: each message stored once, as received; one small row per recipient references it. Mail of
-- version 1 cannot be converted (its received bytes were never kept): an upgrade starts empty
-- (docs/decisions.md "Upgrading the store").
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
