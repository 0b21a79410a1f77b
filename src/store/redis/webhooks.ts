// Webhooks on Redis: every key in one slot (`<prefix>{wh}:`), so each change is one atomic script
// on Redis Cluster too. Registrations never expire; the queue is a sorted set of job ids by due
// time, and claiming moves a job's score to the end of its lease, so a job goes to one node at a
// time and comes back by itself when a node dies with it (docs/push.md "Webhooks").
import { ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type DeliveryAttempt, type DeliveryJob, type WebhookRecord, type WebhookStore } from '../webhooks.ts';
import { call, script, type RedisClient, type ScriptArg as Arg } from '../../redis/client.ts';



// KEYS[1] base. ARGV: id, keyHash, target, record JSON, max
const ADD = `
local b = KEYS[1]
if redis.call('SCARD', b .. 'k:' .. ARGV[2]) >= tonumber(ARGV[5]) then return 0 end
redis.call('SET', b .. 'w:' .. ARGV[1], ARGV[4])
redis.call('SADD', b .. 'k:' .. ARGV[2], ARGV[1])
redis.call('SADD', b .. 't:' .. ARGV[3], ARGV[1])
return 1
`;
// KEYS[1] base. ARGV: id, keyHash. Its pending jobs go with it.
const DEL = `
local b = KEYS[1]
local raw = redis.call('GET', b .. 'w:' .. ARGV[1])
if not raw then return 0 end
local w = cjson.decode(raw)
if w.keyHash ~= ARGV[2] then return 0 end
redis.call('DEL', b .. 'w:' .. ARGV[1])
redis.call('SREM', b .. 'k:' .. ARGV[2], ARGV[1])
redis.call('SREM', b .. 't:' .. w.target, ARGV[1])
for _, id in ipairs(redis.call('SMEMBERS', b .. 'pw:' .. ARGV[1])) do
  redis.call('DEL', b .. 'j:' .. id)
  redis.call('ZREM', b .. 'due', id)
end
redis.call('DEL', b .. 'pw:' .. ARGV[1])
return 1
`;
// KEYS[1] base. ARGV: n, then per job: id, webhookId, dueAt, ttlMs, job JSON
const ENQUEUE = `
local b = KEYS[1]
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local id, wid, due, ttl, json = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  i = i + 5
  if redis.call('SET', b .. 'j:' .. id, json, 'PX', ttl, 'NX') then
    redis.call('ZADD', b .. 'due', due, id)
    redis.call('SADD', b .. 'pw:' .. wid, id)
  end
end
return 1
`;
// KEYS[1] base. ARGV: now, leaseMs, max. Returns job JSONs.
const CLAIM = `
local b = KEYS[1]
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', b .. 'due', '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local json = redis.call('GET', b .. 'j:' .. id)
  if json then
    redis.call('ZADD', b .. 'due', now + tonumber(ARGV[2]), id)
    out[#out + 1] = json
  else
    redis.call('ZREM', b .. 'due', id)
  end
end
return out
`;
// KEYS[1] base. ARGV: jobId, webhookId, retryAt ('' = done), job JSON, attempt JSON, kept, ttlMs
const FINISH = `
local b = KEYS[1]
local id, wid = ARGV[1], ARGV[2]
if ARGV[3] == '' then
  redis.call('DEL', b .. 'j:' .. id)
  redis.call('ZREM', b .. 'due', id)
  redis.call('SREM', b .. 'pw:' .. wid, id)
elseif redis.call('EXISTS', b .. 'j:' .. id) == 1 then
  redis.call('SET', b .. 'j:' .. id, ARGV[4], 'KEEPTTL')
  redis.call('ZADD', b .. 'due', tonumber(ARGV[3]), id)
end
local log = b .. 'a:' .. wid
redis.call('LPUSH', log, ARGV[5])
redis.call('LTRIM', log, 0, tonumber(ARGV[6]) - 1)
redis.call('PEXPIRE', log, tonumber(ARGV[7]))
return 1
`;
// KEYS[1] base. ARGV: webhookId. Counts the jobs still stored (ids of finished ones are dropped).
const PENDING = `
local b = KEYS[1]
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', b .. 'pw:' .. ARGV[1])) do
  if redis.call('EXISTS', b .. 'j:' .. id) == 1 then n = n + 1 else redis.call('SREM', b .. 'pw:' .. ARGV[1], id) end
end
return n
`;

export function createRedisWebhooks(client: RedisClient, prefix: string): WebhookStore {
  const base = `${prefix}{wh}:`;
  const run = {
    add: script(client, 'ephWebhookAdd', ADD, 1),
    del: script(client, 'ephWebhookDel', DEL, 1),
    enqueue: script(client, 'ephWebhookEnqueue', ENQUEUE, 1),
    claim: script(client, 'ephWebhookClaim', CLAIM, 1),
    finish: script(client, 'ephWebhookFinish', FINISH, 1),
    pending: script(client, 'ephWebhookPending', PENDING, 1),
  };
  const parse = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));
  const records = async (ids: string[]) =>
    ids.length === 0 ? [] : ((await client.mget(...ids.map((id) => `${base}w:${id}`))) as (string | null)[]).map((s) => parse<WebhookRecord>(s)).filter((w): w is WebhookRecord => w !== null);

  return {
    addWebhook: (h, max) => call(async () => (await run.add([base], [h.id, h.keyHash, h.target, JSON.stringify(h), max])) === 1),
    getWebhook: (id) => call(async () => parse<WebhookRecord>(await client.get(`${base}w:${id}`))),
    listWebhooks: (keyHash) => call(async () =>
      (await records(await client.smembers(`${base}k:${keyHash}`))).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))),
    deleteWebhook: (keyHash, id) => call(async () => (await run.del([base], [id, keyHash])) === 1),
    matching: (targets) => call(async () => (targets.length === 0 ? [] : records(await client.sunion(...targets.map((t) => `${base}t:${t}`))))),
    enqueue: (jobs) => call(async () => {
      if (jobs.length === 0) return;
      const args: Arg[] = [jobs.length];
      for (const j of jobs) args.push(j.id, j.webhookId, j.dueAt, Math.max(1, j.expiresAt - j.dueAt) + ATTEMPTS_TTL_MS, JSON.stringify(j));
      await run.enqueue([base], args);
    }),
    claim: (now, leaseMs, max) => call(async () => ((await run.claim([base], [now, leaseMs, max])) as string[]).map((s) => JSON.parse(s) as DeliveryJob)),
    finish: (job, webhookId, a, retryAt) => call(async () => {
      const next: DeliveryJob = { ...job, attempts: a.attempt, dueAt: retryAt ?? job.dueAt };
      await run.finish([base], [job.id, webhookId, retryAt === null ? '' : retryAt, JSON.stringify(next), JSON.stringify(a), ATTEMPTS_KEPT, ATTEMPTS_TTL_MS]);
    }),
    listAttempts: (webhookId, limit, now) => call(async () =>
      (await client.lrange(`${base}a:${webhookId}`, 0, limit - 1)).map((s) => JSON.parse(s) as DeliveryAttempt).filter((a) => a.at > now - ATTEMPTS_TTL_MS)),
    pendingCount: (webhookId) => call(async () => Number(await run.pending([base], [webhookId]))),
  };
}
