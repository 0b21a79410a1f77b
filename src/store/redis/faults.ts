// SMTP faults on Redis. An address's rules live in the slot of its mail (`<slot base>f:<address>:`),
// so a use at RCPT or DATA is one atomic script on that address's node of a Cluster: `o` (ids by
// creation sequence), `r` (id → rule JSON), `c` (id → uses left, limited rules only), `n` (the
// sequence). A key's rules are counted in the `{keys}` slot (`…{keys}:faults:<hash>`, ids by
// expiry): an add reserves there first, then adds in the address's slot, and gives the reservation
// back when the address is full. Everything expires by itself with the last rule (PEXPIREAT).
import type { AddFaultResult, FaultRule, FaultStage, FaultStore } from '../faults.ts';
import { addressSlot, type Keyspace } from '../../redis/keys.ts';
import { call, script, type RedisClient } from '../../redis/client.ts';

// Drops expired rules of the address (b = base, now); shared by the scripts below.
const PRUNE = `
local function prune(b, now)
  for _, id in ipairs(redis.call('ZRANGE', b .. 'o', 0, -1)) do
    local raw = redis.call('HGET', b .. 'r', id)
    if (not raw) or tonumber(cjson.decode(raw).expiresAt) <= now then
      redis.call('ZREM', b .. 'o', id)
      redis.call('HDEL', b .. 'r', id)
      redis.call('HDEL', b .. 'c', id)
    end
  end
end
`;
// KEYS[1] the key's counter. ARGV: now, max, id, expiresAt.
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
`;
// KEYS[1] base. ARGV: now, max, id, rule JSON, remaining ('' = unlimited), expiresAt.
const ADD = PRUNE + `
local b = KEYS[1]
local now = tonumber(ARGV[1])
prune(b, now)
if redis.call('ZCARD', b .. 'o') >= tonumber(ARGV[2]) then return 0 end
local seq = redis.call('INCR', b .. 'n')
redis.call('ZADD', b .. 'o', seq, ARGV[3])
redis.call('HSET', b .. 'r', ARGV[3], ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', b .. 'c', ARGV[3], ARGV[5]) end
for _, s in ipairs({ 'o', 'r', 'c', 'n' }) do redis.call('PEXPIREAT', b .. s, ARGV[6]) end
return 1
`;
// KEYS[1] base. Returns { id, rule JSON, remaining ('' = unlimited) } per rule, in creation order.
const LIST = `
local b = KEYS[1]
local out = {}
for _, id in ipairs(redis.call('ZRANGE', b .. 'o', 0, -1)) do
  local raw = redis.call('HGET', b .. 'r', id)
  if raw then
    out[#out + 1] = raw
    out[#out + 1] = redis.call('HGET', b .. 'c', id) or ''
  end
end
return out
`;
// KEYS[1] base. ARGV: keyHash, id ('' = every rule of the key). Returns the ids removed.
const REMOVE = `
local b = KEYS[1]
local out = {}
for _, id in ipairs(redis.call('ZRANGE', b .. 'o', 0, -1)) do
  if ARGV[2] == '' or ARGV[2] == id then
    local raw = redis.call('HGET', b .. 'r', id)
    if (not raw) or cjson.decode(raw).keyHash == ARGV[1] then
      redis.call('ZREM', b .. 'o', id)
      redis.call('HDEL', b .. 'r', id)
      redis.call('HDEL', b .. 'c', id)
      if raw then out[#out + 1] = id end
    end
  end
end
return out
`;
// KEYS[1] base. ARGV: now, stage. Uses the first live rule of the stage. Returns
// { rule JSON or '', remaining before the use ('' = unlimited), 1 when a data rule is left }.
const TAKE = `
local b = KEYS[1]
local ids = redis.call('ZRANGE', b .. 'o', 0, -1)
if #ids == 0 then return { '', '', 0 } end
local now = tonumber(ARGV[1])
local found, left, data = '', '', 0
for _, id in ipairs(ids) do
  local raw = redis.call('HGET', b .. 'r', id)
  local r = raw and cjson.decode(raw)
  if r and tonumber(r.expiresAt) > now then
    local c = redis.call('HGET', b .. 'c', id)
    local live = (not c) or tonumber(c) > 0
    if live and found == '' and r.stage == ARGV[2] then
      found, left = raw, c or ''
      if c then c = redis.call('HINCRBY', b .. 'c', id, -1) end
      live = (not c) or tonumber(c) > 0
    end
    if live and r.stage == 'data' then data = 1 end
  end
end
return { found, left, data }
`;

type Stored = Omit<FaultRule, 'remaining'>;

export function createRedisFaults(client: RedisClient, keys: Keyspace): FaultStore {
  const base = (address: string) => `${keys.slotBase(addressSlot(address))}f:${address}:`;
  const counter = (keyHash: string) => `${keys.keysBase}faults:${keyHash}`;
  const run = {
    reserve: script(client, 'ephFaultReserve', RESERVE, 1),
    add: script(client, 'ephFaultAdd', ADD, 1),
    list: script(client, 'ephFaultList', LIST, 1),
    remove: script(client, 'ephFaultRemove', REMOVE, 1),
    take: script(client, 'ephFaultTake', TAKE, 1),
  };
  const rule = (raw: string, left: string): FaultRule => ({ ...(JSON.parse(raw) as Stored), remaining: left === '' ? null : Number(left) });
  const release = async (keyHash: string, ids: string[]) => {
    if (ids.length) await client.zrem(counter(keyHash), ...ids);
  };

  return {
    addFault: (r, maxPerAddress, maxPerKey, now) => call(async (): Promise<AddFaultResult> => {
      if ((await run.reserve([counter(r.keyHash)], [now, maxPerKey, r.id, r.expiresAt])) !== 1) return 'key_full';
      const { remaining, ...stored } = r;
      const added = await run.add([base(r.address)], [now, maxPerAddress, r.id, JSON.stringify(stored), remaining === null ? '' : remaining, r.expiresAt]);
      if (added === 1) return 'ok';
      await release(r.keyHash, [r.id]);
      return 'address_full';
    }),
    listFaults: (address, keyHash, now) => call(async () => {
      const flat = (await run.list([base(address)], [])) as string[];
      const out: FaultRule[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const r = rule(flat[i], flat[i + 1]);
        if (r.keyHash === keyHash && r.expiresAt > now) out.push(r);
      }
      return out;
    }),
    clearFaults: (address, keyHash) => call(async () => {
      const ids = (await run.remove([base(address)], [keyHash, ''])) as string[];
      await release(keyHash, ids);
      return ids.length;
    }),
    deleteFault: (address, keyHash, id) => call(async () => {
      const ids = (await run.remove([base(address)], [keyHash, id])) as string[];
      await release(keyHash, ids);
      return ids.length > 0;
    }),
    takeFault: (address, stage, now) => call(async () => {
      const [raw, left, data] = (await run.take([base(address)], [now, stage])) as [string, string, number];
      return { rule: raw === '' ? null : rule(raw, left), dataRules: data === 1 };
    }),
  };
}
