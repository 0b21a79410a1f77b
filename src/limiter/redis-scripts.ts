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

/**
 * Limiter take (a sliding window). KEYS: the bucket's use log (zset of use ids scored by time).
 * ARGV: now, windowMs, max, a unique use id. Uses older than the window are dropped first.
 * Returns {1} when counted, {0, retryAfterMs} when the bucket is at its limit.
 */
export const TAKE = `
local now, win, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - win))
local count = redis.call('ZCARD', KEYS[1])
if count >= max then
  if max <= 0 then return {0, win} end
  local oldest = redis.call('ZRANGE', KEYS[1], count - max, count - max, 'WITHSCORES')
  return {0, math.max(1, tonumber(oldest[2]) + win - now)}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
if redis.call('PTTL', KEYS[1]) < win then redis.call('PEXPIRE', KEYS[1], win) end
return {1}
`;
