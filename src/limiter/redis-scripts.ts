// The Lua scripts of the Redis limiter: each runs atomically on its bucket's keys (one hash tag).

/**
 * Limiter hit. KEYS: the bucket's minute counter, its day counter. ARGV: perMinute, minute TTL ms,
 * day TTL ms, and '0' for a bucket without a day window (no day key is written). A request over the
 * minute limit does not count against the day. Returns {minute, day}.
 */
export const LIMIT_HIT = `
local m = redis.call('INCR', KEYS[1])
if m == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if ARGV[4] == '0' then return {m, 0} end
if m > tonumber(ARGV[1]) then return {m, tonumber(redis.call('GET', KEYS[2]) or '0')} end
local d = redis.call('INCR', KEYS[2])
if d == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return {m, d}
`;

/**
 * Limiter wait slot. KEYS: the bucket's slot zset (member slot id, score lease expiry).
 * ARGV: now, max, leaseMs, slot id. Expired leases (a crashed node's) are dropped first.
 * Returns 1 when the slot was taken.
 */
export const ACQUIRE_WAIT = `
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), ARGV[4])
local p = redis.call('PTTL', KEYS[1])
if p < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return 1
`;
