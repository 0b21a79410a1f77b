-- 8 (issue 25): what the authentication checks need from the SMTP session (client IP, HELO name,
-- MAIL FROM: JSON), kept at ingest, and the verdicts once computed. A table of its own (like 4 and
-- 5, self-contained), freed with its message.
CREATE TABLE IF NOT EXISTS message_auth (
  message_key TEXT PRIMARY KEY REFERENCES messages(key) ON DELETE CASCADE,
  envelope    TEXT,                        -- JSON {clientIp, helo, mailFrom}; null when not over SMTP
  verdicts    TEXT                         -- JSON (services/authentication.ts), null until computed
);
