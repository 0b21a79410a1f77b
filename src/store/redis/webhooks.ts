// Webhooks on Redis: every key in one slot (`<prefix>{wh}:`), so each change is one atomic script
// on Redis Cluster too. Registrations never expire; the queue is a sorted set of job ids by due
// time, and claiming moves a job's score to the end of its lease, so a job goes to one node at a
// time and comes back by itself when a node dies with it (docs/push.md "Webhooks"). Jobs do not
// expire by TTL: a second sorted set by expiry lets the sweep (and claim) delete them with their set
// memberships, so the per-webhook and per-key sets count exactly what is pending. An email's event
// body is one hash (`b:<email id>`: payload and a count of the jobs using it), deleted with its last job.
import { ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type AddResult, type DeliveryAttempt, type DeliveryJob, type DroppedJob, type WebhookRecord, type WebhookStore } from '../webhooks.ts';
import { WEBHOOK_FANOUT } from '../../domain/limits.ts';
import { call, replicatedScript, script, type RedisClient, type ScriptArg as Arg } from '../../redis/client.ts';

// Keys under the base: w:<id> record · k:<keyHash> its webhooks · t:<target> webhooks watching it ·
// j:<id> job (JSON, no body) · due, exp: job ids by due time / by expiry · hj:<webhook id>, kj:<keyHash>:
// pending job ids of a webhook / of a key · b:<email id> event body {p, n} · a:<webhook id> attempt log ·
// q:<job id> a job id once given to enqueue (until the job's expiry: a job is queued at most once).
// (`pw:<webhook id>` sets and jobs with their body inside are an earlier version's: still delivered.)

/** Removes a job and everything that counts it; frees its body with its last job. */
const DROP = `
local function drop(b, id, job)
  redis.call('DEL', b .. 'j:' .. id)
  redis.call('ZREM', b .. 'due', id)
  redis.call('ZREM', b .. 'exp', id)
  redis.call('SREM', b .. 'hj:' .. job.webhookId, id)
  redis.call('SREM', b .. 'pw:' .. job.webhookId, id)
  if job.keyHash then redis.call('SREM', b .. 'kj:' .. job.keyHash, id) end
  if job.emailId then
    local body = b .. 'b:' .. job.emailId
    if redis.call('HINCRBY', body, 'n', -1) <= 0 then redis.call('DEL', body) end
  end
end
`;

// KEYS[1] base. ARGV: id, keyHash, target, record JSON, perKey, perTarget. 1 added, 0 key full, 2 target full.
const ADD = `
local b = KEYS[1]
if redis.call('SCARD', b .. 'k:' .. ARGV[2]) >= tonumber(ARGV[5]) then return 0 end
if redis.call('SCARD', b .. 't:' .. ARGV[3]) >= tonumber(ARGV[6]) then return 2 end
redis.call('SET', b .. 'w:' .. ARGV[1], ARGV[4])
redis.call('SADD', b .. 'k:' .. ARGV[2], ARGV[1])
redis.call('SADD', b .. 't:' .. ARGV[3], ARGV[1])
return 1
`;
// KEYS[1] base. ARGV: id, keyHash. Its pending jobs go with it (at most the per-webhook cap).
const DEL = `${DROP}
local b = KEYS[1]
local raw = redis.call('GET', b .. 'w:' .. ARGV[1])
if not raw then return 0 end
local w = cjson.decode(raw)
if w.keyHash ~= ARGV[2] then return 0 end
redis.call('DEL', b .. 'w:' .. ARGV[1])
redis.call('SREM', b .. 'k:' .. ARGV[2], ARGV[1])
redis.call('SREM', b .. 't:' .. w.target, ARGV[1])
for _, id in ipairs(redis.call('SMEMBERS', b .. 'hj:' .. ARGV[1])) do
  local json = redis.call('GET', b .. 'j:' .. id)
  if json then drop(b, id, cjson.decode(json)) end
end
redis.call('DEL', b .. 'hj:' .. ARGV[1], b .. 'pw:' .. ARGV[1])
return 1
`;
// KEYS[1] base. ARGV: perKey, perHook, n bodies, then per body: emailId, payload, ttlMs; n jobs, then
// per job: id, webhookId, keyHash, emailId, dueAt, expiresAt, job JSON. Returns the refused jobs'
// positions (1-based) and reasons, flat.
const ENQUEUE = `
local b = KEYS[1]
local perKey, perHook = tonumber(ARGV[1]), tonumber(ARGV[2])
local i = 4
local bodies = {}
for _ = 1, tonumber(ARGV[3]) do
  bodies[ARGV[i]] = { ARGV[i + 1], ARGV[i + 2] }
  i = i + 3
end
local n = tonumber(ARGV[i])
i = i + 1
local out = {}
for pos = 1, n do
  local id, wid, kh, eid, due, exp, json = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  i = i + 7
  -- q:<id> marks a job id given once, until the job expires: a job given again (its outbox moved
  -- twice: redis-store.ts) is never queued twice, even after it was delivered and removed. It is
  -- written last, so a script that fails on the way leaves the job to be given again.
  if redis.call('EXISTS', b .. 'j:' .. id) == 0 and redis.call('EXISTS', b .. 'q:' .. id) == 0 then
    if redis.call('SCARD', b .. 'hj:' .. wid) >= perHook then
      out[#out + 1] = pos
      out[#out + 1] = 'hook_pending'
    elseif redis.call('SCARD', b .. 'kj:' .. kh) >= perKey then
      out[#out + 1] = pos
      out[#out + 1] = 'key_pending'
    else
      redis.call('SET', b .. 'j:' .. id, json)
      redis.call('ZADD', b .. 'due', due, id)
      redis.call('ZADD', b .. 'exp', exp, id)
      redis.call('SADD', b .. 'hj:' .. wid, id)
      redis.call('SADD', b .. 'kj:' .. kh, id)
      local body, given = b .. 'b:' .. eid, bodies[eid]
      redis.call('HINCRBY', body, 'n', 1)
      if given then
        redis.call('HSETNX', body, 'p', given[1])
        redis.call('PEXPIRE', body, given[2])
      end
    end
    redis.call('SET', b .. 'q:' .. id, 1, 'PXAT', exp)
  end
end
return out
`;
// KEYS[1] base. ARGV: now, leaseMs, max. Returns job JSON and body, flat. Expired jobs are deleted, not returned.
const CLAIM = `${DROP}
local b = KEYS[1]
local now, max = tonumber(ARGV[1]), tonumber(ARGV[3])
-- ARGV[4] per key ('' = no limit), ARGV[5] JSON {keyHash: deliveries it runs now}: each key takes
-- at most its room; a bounded window of due jobs (4 x max) is looked through for the others
local perKey = tonumber(ARGV[4])
local room = {}
local full = 0
if perKey then
  for k, n in pairs(cjson.decode(ARGV[5])) do
    room[k] = perKey - n
    if room[k] <= 0 then full = full + 1 end
  end
end
-- the window skips past each full key's backlog (ARGV[6]: the most one key may have pending), at most 2,000 jobs
local window = max
if perKey then window = math.min(max * 4 + full * tonumber(ARGV[6]), 2000) end
local ids = redis.call('ZRANGEBYSCORE', b .. 'due', '-inf', now, 'LIMIT', 0, window)
local out = {}
for _, id in ipairs(ids) do
  if #out >= max * 2 then break end
  local json = redis.call('GET', b .. 'j:' .. id)
  if not json then
    redis.call('ZREM', b .. 'due', id)
    redis.call('ZREM', b .. 'exp', id)
  else
    local job = cjson.decode(json)
    if tonumber(job.expiresAt) <= now then
      drop(b, id, job)
    elseif not perKey or (room[job.keyHash or ''] or perKey) > 0 then
      if perKey then room[job.keyHash or ''] = (room[job.keyHash or ''] or perKey) - 1 end
      redis.call('ZADD', b .. 'due', now + tonumber(ARGV[2]), id)
      out[#out + 1] = json
      out[#out + 1] = (job.emailId and redis.call('HGET', b .. 'b:' .. job.emailId, 'p')) or ''
    end
  end
end
return out
`;
// KEYS[1] base. ARGV: jobId, webhookId, retryAt ('' = done), attempts, attempt JSON, kept, ttlMs
const FINISH = `${DROP}
local b = KEYS[1]
local id, wid = ARGV[1], ARGV[2]
local json = redis.call('GET', b .. 'j:' .. id)
if ARGV[3] == '' then
  if json then drop(b, id, cjson.decode(json)) else redis.call('ZREM', b .. 'due', id) end
elseif json then
  local job = cjson.decode(json)
  job.attempts = tonumber(ARGV[4])
  redis.call('SET', b .. 'j:' .. id, cjson.encode(job), 'KEEPTTL')
  redis.call('ZADD', b .. 'due', tonumber(ARGV[3]), id)
end
local log = b .. 'a:' .. wid
redis.call('LPUSH', log, ARGV[5])
redis.call('LTRIM', log, 0, tonumber(ARGV[6]) - 1)
redis.call('PEXPIRE', log, tonumber(ARGV[7]))
return 1
`;
// KEYS[1] base. ARGV: kept, ttlMs, then per line: webhookId, attempt JSON
const APPEND_LOG = `
local b = KEYS[1]
for i = 3, #ARGV, 2 do
  local log = b .. 'a:' .. ARGV[i]
  redis.call('LPUSH', log, ARGV[i + 1])
  redis.call('LTRIM', log, 0, tonumber(ARGV[1]) - 1)
  redis.call('PEXPIRE', log, tonumber(ARGV[2]))
end
return 1
`;
// KEYS[1] base. ARGV: now, batch. Deletes up to `batch` expired jobs; returns how many it looked at.
const SWEEP = `${DROP}
local b = KEYS[1]
local ids = redis.call('ZRANGEBYSCORE', b .. 'exp', '-inf', tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local json = redis.call('GET', b .. 'j:' .. id)
  if json then
    drop(b, id, cjson.decode(json))
  else
    redis.call('ZREM', b .. 'exp', id)
    redis.call('ZREM', b .. 'due', id)
  end
end
return #ids
`;

/** Expired jobs one sweep script deletes (a script blocks Redis while it runs). */
const SWEEP_BATCH = 500;
const ADD_RESULT: Record<number, AddResult> = { 0: 'key_full', 1: 'added', 2: 'target_full' };

export function createRedisWebhooks(client: RedisClient, prefix: string, minReplicas = 0): WebhookStore {
  const base = `${prefix}{wh}:`;
  const run = {
    // a registration answers 201 only once its replicas have it (EPHEMAIL_REDIS_MIN_REPLICAS)
    add: replicatedScript(client, 'ephWebhookAdd', ADD, 1, minReplicas),
    del: script(client, 'ephWebhookDel', DEL, 1),
    enqueue: script(client, 'ephWebhookEnqueue', ENQUEUE, 1),
    claim: script(client, 'ephWebhookClaim', CLAIM, 1),
    finish: script(client, 'ephWebhookFinish', FINISH, 1),
    appendLog: script(client, 'ephWebhookAppendLog', APPEND_LOG, 1),
    sweep: script(client, 'ephWebhookSweep', SWEEP, 1),
  };
  const parse = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));
  const records = async (ids: string[]) =>
    ids.length === 0 ? [] : ((await client.mget(...ids.map((id) => `${base}w:${id}`))) as (string | null)[]).map((s) => parse<WebhookRecord>(s)).filter((w): w is WebhookRecord => w !== null);

  return {
    addWebhook: (h, caps) => call(async () => ADD_RESULT[Number(await run.add([base], [h.id, h.keyHash, h.target, JSON.stringify(h), caps.perKey, caps.perTarget]))]),
    getWebhook: (id) => call(async () => parse<WebhookRecord>(await client.get(`${base}w:${id}`))),
    listWebhooks: (keyHash) => call(async () =>
      (await records(await client.smembers(`${base}k:${keyHash}`))).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))),
    deleteWebhook: (keyHash, id) => call(async () => (await run.del([base], [id, keyHash])) === 1),
    matching: (targets) => call(async () => (targets.length === 0 ? [] : records(await client.sunion(...targets.map((t) => `${base}t:${t}`))))),
    enqueue: (bodies, jobs, caps) => call(async (): Promise<DroppedJob[]> => {
      if (jobs.length === 0) return [];
      // a body lives as long as its longest-lived job could, plus the log's margin (a backstop: its last job frees it)
      const ttl = new Map<string, number>();
      for (const j of jobs) ttl.set(j.emailId, Math.max(ttl.get(j.emailId) ?? 1, j.expiresAt - j.dueAt + ATTEMPTS_TTL_MS));
      const used = bodies.filter((x) => ttl.has(x.emailId));
      const args: Arg[] = [caps.perKey, caps.perHook, used.length];
      for (const x of used) args.push(x.emailId, x.payload, ttl.get(x.emailId)!);
      args.push(jobs.length);
      for (const j of jobs) {
        const stored = { id: j.id, webhookId: j.webhookId, keyHash: j.keyHash, emailId: j.emailId, attempts: 0, dueAt: j.dueAt, expiresAt: j.expiresAt };
        args.push(j.id, j.webhookId, j.keyHash, j.emailId, j.dueAt, j.expiresAt, JSON.stringify(stored));
      }
      const out = (await run.enqueue([base], args)) as (number | string)[];
      const dropped: DroppedJob[] = [];
      for (let i = 0; i < out.length; i += 2) dropped.push({ job: jobs[Number(out[i]) - 1], reason: out[i + 1] as DroppedJob['reason'] });
      return dropped;
    }),
    claim: (now, leaseMs, max, fair) => call(async () => {
      const out = (await run.claim([base], [now, leaseMs, max, fair ? fair.perKey : '', fair ? JSON.stringify(fair.held) : '{}', WEBHOOK_FANOUT.pendingPerKey])) as string[];
      const jobs: DeliveryJob[] = [];
      for (let i = 0; i < out.length; i += 2) {
        const j = JSON.parse(out[i]) as DeliveryJob; // an earlier version's job carries its payload itself
        jobs.push({ ...j, keyHash: j.keyHash ?? '', payload: out[i + 1] || j.payload || '' });
      }
      return jobs;
    }),
    finish: (job, webhookId, a, retryAt) => call(async () => {
      await run.finish([base], [job.id, webhookId, retryAt === null ? '' : retryAt, a.attempt, JSON.stringify(a), ATTEMPTS_KEPT, ATTEMPTS_TTL_MS]);
    }),
    appendLog: (lines) => call(async () => {
      if (lines.length === 0) return;
      await run.appendLog([base], [ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, ...lines.flatMap((l) => [l.webhookId, JSON.stringify(l.attempt)])]);
    }),
    listAttempts: (webhookId, limit, now) => call(async () =>
      (await client.lrange(`${base}a:${webhookId}`, 0, limit - 1)).map((s) => JSON.parse(s) as DeliveryAttempt).filter((a) => a.at > now - ATTEMPTS_TTL_MS)),
    pendingCount: (webhookId) => call(async () => client.scard(`${base}hj:${webhookId}`)),
    sweepExpired: (now) => call(async () => {
      let removed = 0;
      for (;;) {
        const n = Number(await run.sweep([base], [now, SWEEP_BATCH]));
        removed += n;
        if (n < SWEEP_BATCH) return removed;
      }
    }),
  };
}
