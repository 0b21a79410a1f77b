// IMAP UIDs on Redis (store/uids.ts): per address a hash (validity, last UID, last id) and a sorted
// set (id → UID), both in the inbox's slot, numbered by one script: every node numbers alike.
import { StoreUnavailableError } from '../../domain/errors.ts';
import type { RedisClient } from '../../redis/client.ts';
import { addressSlot, type Keyspace } from '../../redis/keys.ts';
import type { UidStore } from '../uids.ts';

/**
 * KEYS[1]: the address's hash (v validity, n last UID, l last id, k keepUntil), KEYS[2]: its sorted set (member id, score UID).
 * ARGV: now (ms), keepUntil (ms), complete (0/1), ids…. Returns validity, next, then one UID per id.
 */
const NUMBER = `
local now, keep, complete = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local m = redis.call('HMGET', KEYS[1], 'v', 'n', 'l', 'k')
local v, n, last, kept = m[1], tonumber(m[2] or '0'), m[3] or '', tonumber(m[4] or '0')
-- a numbering past its keepUntil is over (by the caller's clock; the key's own expiry is the backstop)
if v and kept <= now then v = nil end
if not v then
  kept = 0
  v = string.format('%.0f', math.floor(now / 1000))
  n = 0
  last = ''
  redis.call('DEL', KEYS[2])
end
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local u = redis.call('ZSCORE', KEYS[2], id)
  if u then
    out[#out + 1] = tonumber(u)
  elseif id > last then
    n = n + 1
    last = id
    redis.call('ZADD', KEYS[2], n, id)
    out[#out + 1] = n
  else
    out[#out + 1] = 0
  end
end
if complete == '1' then
  local first = nil
  for _, u in ipairs(out) do if u > 0 then first = u break end end
  if first then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. first) else redis.call('DEL', KEYS[2]) end
end
if keep > kept then kept = keep end
redis.call('HSET', KEYS[1], 'v', v, 'n', n, 'l', last, 'k', string.format('%.0f', kept))
redis.call('PEXPIREAT', KEYS[1], kept)
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIREAT', KEYS[2], kept) end
local res = { tonumber(v), n + 1 }
for _, u in ipairs(out) do res[#res + 1] = u end
return res
`;

export function createRedisUids(client: RedisClient, keys: Keyspace): UidStore {
  const base = (address: string) => `${keys.slotBase(addressSlot(address))}imap:${address}`;
  return {
    async number(address, ids, complete, keepUntil, now) {
      const b = base(address);
      let res: number[];
      try {
        res = (await client.eval(NUMBER, 2, `${b}:m`, `${b}:u`, String(now), String(Math.round(keepUntil)), complete ? '1' : '0', ...ids)) as number[];
      } catch (err) {
        throw new StoreUnavailableError(`IMAP UIDs could not be read: ${(err as Error).message}`);
      }
      return { validity: Number(res[0]), next: Number(res[1]), uids: res.slice(2).map(Number) };
    },
    async close() {
      // the connection is the store's
    },
  };
}
