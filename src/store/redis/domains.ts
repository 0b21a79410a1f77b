// Domains added at run time, on Redis: one hash in one slot (`<prefix>{domains}:all`, keys.ts), so
// each change is one atomic script on Redis Cluster too. A field's value is `<addedAt>` while the
// domain is active and `<addedAt>:<retiredAt>` once retired. Never expires (like API keys).
import { call, replicatedScript, type RedisClient } from '../../redis/client.ts';
import type { DomainRecord, DomainStore } from '../domains.ts';

// KEYS[1] the hash. ARGV: domain, now, maxActive. Returns {1, changed, value} or {0, active count}.
const ADD = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and not string.find(cur, ':', 1, true) then return {1, 0, cur} end
local active = 0
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  if not string.find(v, ':', 1, true) then active = active + 1 end
end
if active >= tonumber(ARGV[3]) then return {0, active} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1, 1, ARGV[2]}
`;
// KEYS[1] the hash. ARGV: domain, now. Returns the value after, or false when never added.
const RETIRE = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return false end
if string.find(cur, ':', 1, true) then return cur end
local v = cur .. ':' .. ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], v)
return v
`;

const toRecord = (domain: string, value: string): DomainRecord => {
  const [added, retired] = value.split(':');
  return { domain, addedAt: Number(added), retiredAt: retired === undefined ? null : Number(retired) };
};

/** `key`: the hash (keyspace(prefix).domains); writes wait for `minReplicas` replicas like a new API key. */
export function createRedisDomains(client: RedisClient, key: string, minReplicas: number): DomainStore {
  const add = replicatedScript(client, 'ephAddDomain', ADD, 1, minReplicas);
  const retire = replicatedScript(client, 'ephRetireDomain', RETIRE, 1, minReplicas);
  return {
    listDomains: () =>
      call(async () =>
        Object.entries(await client.hgetall(key))
          .map(([d, v]) => toRecord(d, v))
          .sort((a, b) => a.addedAt - b.addedAt || (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0)),
      ),
    addDomain: (domain, now, maxActive) =>
      call(async () => {
        const r = (await add([key], [domain, now, maxActive])) as [number, number, string?];
        return r[0] === 1 ? { ok: true as const, changed: r[1] === 1, record: toRecord(domain, String(r[2])) } : { ok: false as const, active: Number(r[1]) };
      }),
    retireDomain: (domain, now) =>
      call(async () => {
        const v = (await retire([key], [domain, now])) as string | null;
        return v === null ? null : toRecord(domain, v);
      }),
  };
}
