// API keys on Redis: one hash per key (`<prefix>{keys}:k:<sha256>`: `p` prefix, `l` label, `c`
// contact, `t` created, `r` revoked, `u` last used), the list of hashes by creation time
// (`{keys}:all`) and the prefix index (`{keys}:px`, read by a revocation), all in the `{keys}` slot
// so a revocation by prefix is one script on a Cluster too.
// Never expire. A new key waits for `minReplicas` replicas (it is shown once). How many keys an IP
// mints is the limiter's (limiter/redis.ts).
import { call, replicatedScript, script, type RedisClient } from '../../redis/client.ts';
import type { Keyspace } from '../../redis/keys.ts';
import type { KeyRecord, KeyStore, NewKey } from '../keys.ts';

/**
 * KEYS: the key record, the key list, the prefix index. ARGV: hash, prefix, label, contact ('' with
 * hasContact 0), hasContact, createdAt.
 */
const ADD_KEY = `
local fields = {'p', ARGV[2], 'l', ARGV[3], 't', ARGV[6]}
if ARGV[5] == '1' then fields[#fields + 1] = 'c'; fields[#fields + 1] = ARGV[4] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[2] .. ':' .. ARGV[1])
return 1
`;

/**
 * KEYS: the key list, the prefix index (a sorted set, all scores 0, of `<prefix>:<hash>`: read by
 * lexical range). ARGV: keys base (`<prefix>{keys}:`), prefix, now. Marks every unrevoked key whose
 * prefix starts with ARGV[2]; returns their hashes. Reads only the index's range of that prefix:
 * O(log N + matching keys), whatever the number of keys. Keys an earlier version added (no index
 * entry: the index is smaller than the list) are indexed first, once.
 */
const REVOKE_KEYS = `
local base, prefix, now = ARGV[1], ARGV[2], ARGV[3]
if redis.call('ZCARD', KEYS[2]) < redis.call('ZCARD', KEYS[1]) then
  for _, hash in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local p = redis.call('HGET', base .. 'k:' .. hash, 'p')
    if p then redis.call('ZADD', KEYS[2], 0, p .. ':' .. hash) end
  end
end
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], '[' .. prefix, '[' .. prefix .. '\\255')) do
  local hash = string.match(m, ':([^:]*)$')
  local rec = base .. 'k:' .. hash
  local v = redis.call('HMGET', rec, 'p', 'r')
  if v[1] and not v[2] and string.sub(v[1], 1, #prefix) == prefix then
    redis.call('HSET', rec, 'r', now)
    out[#out + 1] = hash
  end
end
return out
`;

/** KEYS[1]: the key's record; ARGV[1]: the time. Field `u` only grows; no record, no write. */
const TOUCH_KEY = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'u') or '0') >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'u', ARGV[1])
return 1
`;

const toKey = (hash: string, r: Record<string, string>): KeyRecord | null =>
  r.p === undefined
    ? null
    : { hash, prefix: r.p, label: r.l ?? '', contactEmail: r.c ?? null, createdAt: Number(r.t), revokedAt: r.r === undefined ? null : Number(r.r), lastUsedAt: r.u === undefined ? null : Number(r.u) };

export function createRedisKeys(client: RedisClient, k: Keyspace, minReplicas: number): KeyStore {
  const add = replicatedScript(client, 'ephAddKey', ADD_KEY, 3, minReplicas);
  const revoke = script(client, 'ephRevokeKeys', REVOKE_KEYS, 2);
  /** The prefix index: `<prefix>:<hash>` by lexical order, what a revocation by prefix reads. */
  const keyIndex = `${k.keysBase}px`;
  const touch = script(client, 'ephTouchKey', TOUCH_KEY, 1);

  async function readKeys(hashes: string[]): Promise<KeyRecord[]> {
    if (hashes.length === 0) return [];
    const pipe = client.pipeline();
    for (const h of hashes) pipe.hgetall(k.keyRecord(h));
    const res = (await pipe.exec()) ?? [];
    const out: KeyRecord[] = [];
    res.forEach(([err, r], i) => {
      if (err) throw err;
      const rec = toKey(hashes[i], r as Record<string, string>);
      if (rec) out.push(rec);
    });
    return out;
  }

  return {
    addKey: (key: NewKey) =>
      call(async () => {
        await add([k.keyRecord(key.hash), k.keyList, keyIndex], [key.hash, key.prefix, key.label, key.contactEmail ?? '', key.contactEmail === null ? 0 : 1, key.createdAt]);
      }),
    findKey: (hash) => call(async () => toKey(hash, await client.hgetall(k.keyRecord(hash)))),
    listKeys: () =>
      call(async () => {
        const all = await readKeys(await client.zrange(k.keyList, '0', '-1'));
        return all.sort((a, b) => a.createdAt - b.createdAt || (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0));
      }),
    revokeKeys: (prefix, now) => call(async () => readKeys((await revoke([k.keyList, keyIndex], [k.keysBase, prefix, now])) as string[])),
    touchKey: (hash, at) => call(async () => void (await touch([k.keyRecord(hash)], [at]))),
  };
}
