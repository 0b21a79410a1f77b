-- 4: each message's search text (domain/search.ts), made at ingest; none for mail stored before
-- (such a message gets one in the background when a search meets it: docs/decisions.md "Body search").
-- A table of its own, not a column of messages: a column after `raw` is reached only through the
-- overflow pages of the whole message (2 MB read to find 32 KB). Kept as UTF-8 bytes (a BLOB): a
-- search is instr() over bytes inside SQLite, with no string made per message on the main thread.
CREATE TABLE message_search (
  message_key TEXT PRIMARY KEY REFERENCES messages(key) ON DELETE CASCADE,
  text        BLOB NOT NULL                -- UTF-8, lowercase, at most 32,768 characters
);
