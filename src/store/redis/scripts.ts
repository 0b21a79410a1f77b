// The Lua scripts of the Redis store. Each runs atomically in one slot: its declared key carries the
// slot's hash tag and every key it builds from ARGV (`<base>e:<id>`, `<base>a:<id>:<n>`,
// `<base>i:<address>`, `<base>sx`) carries the same tag (keys.ts). Lua numbers are doubles: every
// value used here (48-bit ms, 42-bit counter) is an exact integer below 2^53.

/** Helpers shared by the scripts: time from the server, expiry that only ever moves later. */
const PRELUDE = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local function ms_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function extend(key, at, now)
  local p = redis.call('PTTL', key)
  if p < 0 or now + p < at then redis.call('PEXPIREAT', key, string.format('%.0f', at)) end
end
`;

/**
 * addEmails (the rows; their messages are written first by ADD_MESSAGE). KEYS[1]: the id sequence
 * (hash: ms, c). ARGV[1]: number of emails, then per email: base, address, low32 (slot << 18 | 18
 * random bits), r30 (random counter start), expiresAt, summary JSON, message key.
 * Then, when the mail has webhook events (store/webhooks.ts MailEvents), the outbox they are written
 * to (a hash in this script's slot: `b:<email id>` body, `j:<job id>` job JSON), the number of
 * bodies, per body: the email's position (1-based), n pieces, the pieces (joined with the email's id);
 * the number of jobs, per job: the email's position, the job id, its JSON up to the email id; then the
 * latest expiry. The events are written before any row: a write that fails leaves nothing.
 * Ids follow domain/ids.ts exactly: 48-bit ms from the server's TIME, a 42-bit counter
 * (rand_a 12 bits + the top 30 of rand_b), 32 low bits. A new millisecond starts the counter at
 * r30 << 10; the same or an earlier one (a clock stepping back, another node) increments it.
 * Returns the ids in input order.
 */
export const ADD_EMAILS = `${PRELUDE}
local now = ms_now()
local st = redis.call('HMGET', KEYS[1], 'ms', 'c')
local last = tonumber(st[1]) or -1
local counter = tonumber(st[2]) or 0
local MAX = 4398046511103
local function hex(n, w) return string.format('%0' .. w .. 'x', n) end
local out = {}
local rows = {}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local low32, r30 = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if now > last then
    last = now
    counter = r30 * 1024
  else
    counter = counter + 1
    if counter > MAX then
      last = last + 1
      counter = 0
    end
  end
  local rand_a = math.floor(counter / 1073741824)
  local high32 = 2147483648 + counter % 1073741824
  local t = hex(math.floor(last / 16777216), 6) .. hex(last % 16777216, 6)
  local b = hex(math.floor(high32 / 65536), 4) .. hex(high32 % 65536, 4) .. hex(math.floor(low32 / 65536), 4) .. hex(low32 % 65536, 4)
  out[#out + 1] = t:sub(1, 8) .. '-' .. t:sub(9, 12) .. '-7' .. hex(rand_a, 3) .. '-' .. b:sub(1, 4) .. '-' .. b:sub(5, 16)
  rows[#rows + 1] = i
  i = i + 7
end
local outbox = ARGV[i]
if outbox and outbox ~= '' then
  local fields = {}
  i = i + 1
  for _ = 1, tonumber(ARGV[i]) do
    local id, n = out[tonumber(ARGV[i + 1])], tonumber(ARGV[i + 2])
    local pieces = {}
    for p = 1, n do pieces[p] = ARGV[i + 2 + p] end
    fields[#fields + 1] = 'b:' .. id
    fields[#fields + 1] = table.concat(pieces, id)
    i = i + 2 + n
  end
  i = i + 1
  for _ = 1, tonumber(ARGV[i]) do
    fields[#fields + 1] = 'j:' .. ARGV[i + 2]
    fields[#fields + 1] = ARGV[i + 3] .. out[tonumber(ARGV[i + 1])] .. '"}'
    i = i + 3
  end
  redis.call('HSET', outbox, unpack(fields))
  extend(outbox, tonumber(ARGV[i + 1]), now)
end
for k, r in ipairs(rows) do
  local base, address, expires, summary, mkey = ARGV[r], ARGV[r + 1], tonumber(ARGV[r + 4]), ARGV[r + 5], ARGV[r + 6]
  local id = out[k]
  local at = string.format('%.0f', expires)
  local ekey = base .. 'e:' .. id
  redis.call('HSET', ekey, 's', summary, 'm', mkey, 'x', at, 'a', address)
  redis.call('PEXPIREAT', ekey, at)
  local ix = base .. 'i:' .. address
  redis.call('ZADD', ix, 0, id)
  extend(ix, expires, now)
  redis.call('ZADD', base .. 'sx', at, id .. address)
  extend(base .. 'sx', expires, now)
end
redis.call('HSET', KEYS[1], 'ms', string.format('%.0f', last), 'c', string.format('%.0f', counter))
return out
`;

/**
 * listEmails / hasEmails. KEYS[1]: the inbox index (a zset of ids, all score 0, read by lex order).
 * ARGV: base, mode (n newest, b before, s since), cursor, limit, now. Returns id, summary pairs of
 * live emails; index entries whose email Redis already expired are trimmed on the way.
 */
export const LIST_EMAILS = `
local ix, base, mode, cursor = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local limit, now = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
local batch = limit + 16
while true do
  local ids
  if mode == 's' then
    ids = redis.call('ZRANGEBYLEX', ix, '(' .. cursor, '+', 'LIMIT', 0, batch)
  else
    ids = redis.call('ZREVRANGEBYLEX', ix, cursor == '' and '+' or '(' .. cursor, '-', 'LIMIT', 0, batch)
  end
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', base .. 'e:' .. id, 'x', 's')
    if not v[1] then
      redis.call('ZREM', ix, id)
    elseif tonumber(v[1]) > now then
      out[#out + 1] = id
      out[#out + 1] = v[2]
      if #out >= 2 * limit then return out end
    end
    cursor = id
  end
  if #ids < batch then return out end
end
`;

/**
 * deleteEmail. KEYS[1]: the email. ARGV: base, id, now. Returns {1, message key} when a live email
 * was removed, {0} otherwise.
 */
export const DELETE_EMAIL = `
local v = redis.call('HMGET', KEYS[1], 'x', 'a', 'm')
if not v[1] or tonumber(v[1]) <= tonumber(ARGV[3]) then return {0} end
local base, id = ARGV[1], ARGV[2]
redis.call('DEL', KEYS[1])
redis.call('ZREM', base .. 'i:' .. v[2], id)
redis.call('ZREM', base .. 'sx', id .. v[2])
return {1, v[3] or ''}
`;

/**
 * purgeInbox. KEYS[1]: the inbox index. ARGV: base, address, now. Returns {how many were live, then
 * the message key of every removed row}.
 */
export const PURGE_INBOX = `
local base, address, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {0}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local ekey = base .. 'e:' .. id
  local v = redis.call('HMGET', ekey, 'x', 'm')
  if v[1] and tonumber(v[1]) > now then out[1] = out[1] + 1 end
  if v[2] then out[#out + 1] = v[2] end
  redis.call('DEL', ekey)
  redis.call('ZREM', base .. 'sx', id .. address)
end
redis.call('DEL', KEYS[1])
return out
`;

/**
 * sweepExpired for one slot. KEYS[1]: the slot's expiry zset (score expiresAt, member id..address).
 * ARGV: base, now, batch. Removes up to `batch` emails with expiresAt <= now; returns
 * {removed, remaining members and outbox entries, outbox entries (webhook events not yet queued),
 * then the message key of each removed row}.
 */
export const SWEEP_SLOT = `${PRELUDE}
local base = ARGV[1]
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {#members, 0, 0}
for _, m in ipairs(members) do
  local id, address = m:sub(1, 36), m:sub(37)
  local mk = redis.call('HGET', base .. 'e:' .. id, 'm')
  if mk then out[#out + 1] = mk end
  redis.call('DEL', base .. 'e:' .. id)
  redis.call('ZREM', base .. 'i:' .. address, id)
  redis.call('ZREM', KEYS[1], m)
end
out[3] = redis.call('HLEN', base .. 'wo')
out[2] = redis.call('ZCARD', KEYS[1]) + out[3]
return out
`;

/**
 * A message, stored once. KEYS: its hash (n: rows referencing it, x: expiry, v: views, pc: parts,
 * t: search text, ae: SMTP envelope, av: authentication verdicts), its raw bytes. ARGV: raw, rows,
 * expiresAt, its envelope ('' when none), and its search text when it has one.
 * Both expire at expiresAt by Redis itself.
 */
export const ADD_MESSAGE = `
redis.call('HSET', KEYS[1], 'n', ARGV[2], 'x', ARGV[3])
if ARGV[4] and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'ae', ARGV[4]) end
if ARGV[5] then redis.call('HSET', KEYS[1], 't', ARGV[5]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[1], 'PXAT', ARGV[3])
return 1
`;

/** One row fewer references a message. KEYS[1]: its hash; ARGV[1]: its key base. Frees it at 0. */
export const UNREF_MESSAGE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
if n > 0 then return n end
local pc = tonumber(redis.call('HGET', KEYS[1], 'pc') or '0')
for i = 0, pc - 1 do redis.call('DEL', ARGV[1] .. ':p:' .. i) end
redis.call('DEL', KEYS[1], ARGV[1] .. ':r')
return 0
`;

/**
 * Derived views of a message. KEYS[1]: its hash; ARGV: key base, views, then the parts. Writes
 * nothing when the message is gone; parts expire with the message. Returns 1 when written.
 */
export const PUT_VIEWS = `
local x = redis.call('HGET', KEYS[1], 'x')
if not x then return 0 end
local base = ARGV[1]
local old = tonumber(redis.call('HGET', KEYS[1], 'pc') or '0')
for i = 0, old - 1 do redis.call('DEL', base .. ':p:' .. i) end
for i = 3, #ARGV do redis.call('SET', base .. ':p:' .. (i - 3), ARGV[i], 'PXAT', x) end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'pc', #ARGV - 2)
return 1
`;

/**
 * Whether a message's search text contains a needle. KEYS[1]: its hash; ARGV[1]: the needle (search
 * form). Returns 1 or 0, or -1 when the message is gone or has no search text. One plain find over
 * at most SEARCH_TEXT_MAX_CHARS: the text never leaves Redis.
 */
export const MATCH_TEXT = `
local t = redis.call('HGET', KEYS[1], 't')
if not t then return -1 end
if string.find(t, ARGV[1], 1, true) then return 1 end
return 0
`;

/** The search text of a message that has none. KEYS[1]: its hash; ARGV[1]: the text. 1 when written. */
export const PUT_AUTH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'av', ARGV[1])
return 1
`;

export const PUT_SEARCH_TEXT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[1], 't', ARGV[1])
`;
