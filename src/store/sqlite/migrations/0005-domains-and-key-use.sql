-- 5 (issue 26): domains added at run time (EPHEMAIL_DOMAINS are not stored) and when each API key
-- was last used. Self-contained (IF NOT EXISTS, tables of its own, no other table altered), so it
-- applies cleanly in whatever position a merge of migrations gives it.
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
