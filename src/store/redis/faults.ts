// SMTP faults on Redis. An address's rules live in the slot of its mail (`<slot base>f:<address>:`),
// so a use at RCPT or DATA is one atomic script on that address's node of a Cluster: `o` (ids by
// creation sequence), `r` (id → rule JSON), `c` (id → uses left, limited rules only), `n` (the
// sequence). A key's rules are counted in the `{keys}` slot (`…{keys}:faults:<hash>`, ids by
// expiry, and `…:at`, id → address, so the operator can find and remove a key's rules): an add
// reserves there first, then adds in the address's slot, and gives the reservation back when the
// key already has its share of the address. Everything expires by itself with the last rule
// (PEXPIREAT). A rule that would apply is first checked against its key's record (`r`, revoked,
// also in `{keys}`: one more round trip, only for addresses with rules): a revoked key's rules are
// then removed everywhere and the next rule is taken, so they stop applying with the revocation.
import type { AddFaultResult, FaultFilter, FaultRule, FaultStage, FaultStore } from '../faults.ts';
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
// KEYS[1] the key's counter, KEYS[2] its id → address hash. ARGV: now, max, id, expiresAt, address.
const RESERVE = `
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  redis.call('HDEL', KEYS[2], unpack(gone))
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[5])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return 1
`;
// KEYS[1] the key's counter, KEYS[2] its id → address hash. ARGV: the ids given back.
const RELEASE = `
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return 1
`;
// KEYS[1] base. ARGV: now, max (per key on the address), id, rule JSON, remaining ('' = unlimited),
// expiresAt, keyHash.
const ADD = PRUNE + `
local b = KEYS[1]
local now = tonumber(ARGV[1])
prune(b, now)
local mine = 0
for _, raw in ipairs(redis.call('HVALS', b .. 'r')) do
  if cjson.decode(raw).keyHash == ARGV[7] then mine = mine + 1 end
end
if mine >= tonumber(ARGV[2]) then return 0 end
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
// KEYS[1] base. ARGV: keyHash ('' = any key's), id ('' = every rule of the key). Returns
// { id, keyHash } of each rule removed, flat.
const REMOVE = `
local b = KEYS[1]
local out = {}
for _, id in ipairs(redis.call('ZRANGE', b .. 'o', 0, -1)) do
  if ARGV[2] == '' or ARGV[2] == id then
    local raw = redis.call('HGET', b .. 'r', id)
    local owner = raw and cjson.decode(raw).keyHash
    if (not raw) or ARGV[1] == '' or owner == ARGV[1] then
      redis.call('ZREM', b .. 'o', id)
      redis.call('HDEL', b .. 'r', id)
      redis.call('HDEL', b .. 'c', id)
      if raw then
        out[#out + 1] = id
        out[#out + 1] = owner
      end
    end
  end
end
return out
`;
// KEYS[1] base. ARGV: now, stage, then key hashes whose rules are skipped (revoked). Uses the first
// live rule of the stage. Returns { rule JSON or '', remaining before the use ('' = unlimited), 1
// when a data rule is left }.
const TAKE = `
local b = KEYS[1]
local ids = redis.call('ZRANGE', b .. 'o', 0, -1)
if #ids == 0 then return { '', '', 0 } end
local now = tonumber(ARGV[1])
local skip = {}
for i = 3, #ARGV do skip[ARGV[i]] = true end
local found, left, data = '', '', 0
for _, id in ipairs(ids) do
  if found ~= '' and data == 1 then break end
  local raw = redis.call('HGET', b .. 'r', id)
  local r = raw and cjson.decode(raw)
  if r and tonumber(r.expiresAt) > now and not skip[r.keyHash] then
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
  const addresses = (keyHash: string) => `${keys.keysBase}faults:${keyHash}:at`;
  const run = {
    reserve: script(client, 'ephFaultReserve', RESERVE, 2),
    release: script(client, 'ephFaultRelease', RELEASE, 2),
    add: script(client, 'ephFaultAdd', ADD, 1),
    list: script(client, 'ephFaultList', LIST, 1),
    remove: script(client, 'ephFaultRemove', REMOVE, 1),
    take: script(client, 'ephFaultTake', TAKE, 1),
  };
  const rule = (raw: string, left: string): FaultRule => ({ ...(JSON.parse(raw) as Stored), remaining: left === '' ? null : Number(left) });
  const release = async (keyHash: string, ids: string[]) => {
    if (ids.length) await run.release([counter(keyHash), addresses(keyHash)], ids);
  };
  /** Removes matching rules of one address (keyHash '' = any key's, id '' = all); gives their places back. */
  const remove = async (address: string, keyHash: string, id: string): Promise<number> => {
    const flat = (await run.remove([base(address)], [keyHash, id])) as string[];
    const byKey = new Map<string, string[]>();
    for (let i = 0; i < flat.length; i += 2) byKey.set(flat[i + 1], [...(byKey.get(flat[i + 1]) ?? []), flat[i]]);
    for (const [hash, ids] of byKey) await release(hash, ids);
    return flat.length / 2;
  };
  const listAddress = async (address: string) => {
    const flat = (await run.list([base(address)], [])) as string[];
    const out: FaultRule[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push(rule(flat[i], flat[i + 1]));
    return out;
  };
  /** The addresses the key has rules on (from its id → address index). */
  const addressesOf = async (keyHash: string) => [...new Set(Object.values(await client.hgetall(addresses(keyHash))))];
  const removeKey = async (keyHash: string) => {
    let n = 0;
    for (const address of await addressesOf(keyHash)) n += await remove(address, keyHash, '');
    return n;
  };
  const revoked = async (keyHash: string) => (await client.hexists(keys.keyRecord(keyHash), 'r')) === 1;

  return {
    addFault: (r, maxPerAddress, maxPerKey, now) => call(async (): Promise<AddFaultResult> => {
      if ((await run.reserve([counter(r.keyHash), addresses(r.keyHash)], [now, maxPerKey, r.id, r.expiresAt, r.address])) !== 1) return 'key_full';
      const { remaining, ...stored } = r;
      const added = await run.add([base(r.address)], [now, maxPerAddress, r.id, JSON.stringify(stored), remaining === null ? '' : remaining, r.expiresAt, r.keyHash]);
      if (added === 1) return 'ok';
      await release(r.keyHash, [r.id]);
      return 'address_full';
    }),
    listFaults: (address, keyHash, now) => call(async () => (await listAddress(address)).filter((r) => r.keyHash === keyHash && r.expiresAt > now)),
    clearFaults: (address, keyHash) => call(() => remove(address, keyHash, '')),
    deleteFault: (address, keyHash, id) => call(async () => (await remove(address, keyHash, id)) > 0),
    findFaults: (f: FaultFilter, now) => call(async () => {
      const lists = await Promise.all((f.address !== undefined ? [f.address] : await addressesOf(f.keyHash as string)).map(listAddress));
      return lists.flat()
        .filter((r) => r.expiresAt > now && (f.keyHash === undefined || r.keyHash === f.keyHash))
        .sort((a, b) => a.createdAt - b.createdAt);
    }),
    removeFaults: (f: FaultFilter) => call(() => (f.address !== undefined ? remove(f.address, f.keyHash ?? '', '') : removeKey(f.keyHash as string))),
    takeFault: (address, stage, now) => call(async () => {
      const skip: string[] = [];
      for (;;) {
        const [raw, left, data] = (await run.take([base(address)], [now, stage, ...skip])) as [string, string, number];
        if (raw === '') return { rule: null, dataRules: data === 1 };
        const found = rule(raw, left);
        if (!(await revoked(found.keyHash))) return { rule: found, dataRules: data === 1 };
        // its key was revoked (by the admin API, the CLI, another node): its rules go, everywhere
        skip.push(found.keyHash);
        await removeKey(found.keyHash);
        await remove(address, found.keyHash, '');
      }
    }),
  };
}
