// Webhooks on SQLite: registrations, the delivery queue and the attempt log in the store's file,
// written on the main connection (small rows; synchronous=FULL, so enqueue is durable when it
// returns), except new mail's events: the writer inserts them in the mail's own transaction
// (write-ops.ts; both queue through event-queue.ts: one rule for the caps). One process owns the file, so a lease is only a flag: at start every lease is dropped.
// An email's event body is one row of webhook_payloads, freed by a trigger with its last job.
// Transactions that read before they write (counts against a cap, the due jobs) begin IMMEDIATE: a
// deferred one would read a snapshot, and its first write fails with SQLITE_BUSY at once (not after
// busy_timeout) when the writer thread committed mail in between.
import type Database from 'better-sqlite3';
import { eventQueue } from './event-queue.ts';
import { keptCount } from './kept-count.ts';
import {
  ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type AddResult, type DeliveryAttempt, type DeliveryJob, type DroppedJob, type EventBody, type NewDeliveryJob,
  type PendingCaps, type WebhookRecord, type WebhookStore,
  type FairClaim,
} from '../webhooks.ts';

interface HookRow { id: string; key_hash: string; url: string; target: string; secret: string; created_at: number }
interface JobRow { id: string; webhook_id: string; key_hash: string; email_id: string; payload: string; attempts: number; due_at: number; expires_at: number }
interface AttemptRow { job_id: string; email_id: string; attempt: number; at: number; status: DeliveryAttempt['status']; response_code: number | null; error: string | null; next_retry_at: number | null }

const toHook = (r: HookRow): WebhookRecord => ({ id: r.id, keyHash: r.key_hash, url: r.url, target: r.target, secret: r.secret, createdAt: r.created_at });
const toJob = (r: JobRow): DeliveryJob => ({
  id: r.id, webhookId: r.webhook_id, keyHash: r.key_hash, emailId: r.email_id, payload: r.payload, attempts: r.attempts, dueAt: r.due_at, expiresAt: r.expires_at,
});
const toAttempt = (r: AttemptRow): DeliveryAttempt => ({
  jobId: r.job_id, emailId: r.email_id, attempt: r.attempt, at: r.at, status: r.status, responseCode: r.response_code, error: r.error, nextRetryAt: r.next_retry_at,
});

/** Expired jobs one sweep transaction deletes (the main connection: the event loop turns between batches). */
const SWEEP_BATCH = 2000;

export function createSqliteWebhooks(db: Database.Database, guard: <T>(fn: () => T) => Promise<T>): WebhookStore {
  db.prepare('UPDATE webhook_jobs SET leased = 0 WHERE leased = 1').run(); // this process owns the file now
  const q = {
    countByKey: db.prepare('SELECT count(*) FROM webhooks WHERE key_hash = ?').pluck(),
    countByTarget: db.prepare('SELECT count(*) FROM webhooks WHERE target = ?').pluck(),
    insert: db.prepare('INSERT INTO webhooks (id, key_hash, url, target, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
    get: db.prepare('SELECT * FROM webhooks WHERE id = ?'),
    byKey: db.prepare('SELECT * FROM webhooks WHERE key_hash = ? ORDER BY created_at ASC, id ASC'),
    del: db.prepare('DELETE FROM webhooks WHERE id = ? AND key_hash = ?'),
    delJobs: db.prepare('DELETE FROM webhook_jobs WHERE webhook_id = ?'),
    byTarget: db.prepare('SELECT * FROM webhooks WHERE target = ?'),
    countAll: db.prepare('SELECT count(*) FROM webhooks').pluck(),
    due: db.prepare(`SELECT j.*, coalesce(p.payload, '') AS payload FROM webhook_jobs j LEFT JOIN webhook_payloads p ON p.email_id = j.email_id
      WHERE j.due_at <= ? AND j.expires_at > ? AND j.key_hash NOT IN (SELECT value FROM json_each(?)) ORDER BY j.due_at ASC LIMIT ?`),
    anyDue: db.prepare('SELECT 1 FROM webhook_jobs WHERE due_at <= ? AND expires_at > ? LIMIT 1').pluck(),
    lease: db.prepare('UPDATE webhook_jobs SET leased = 1, due_at = ? WHERE id = ?'),
    done: db.prepare('DELETE FROM webhook_jobs WHERE id = ?'),
    retry: db.prepare('UPDATE webhook_jobs SET leased = 0, attempts = ?, due_at = ? WHERE id = ?'),
    log: db.prepare(`INSERT INTO webhook_attempts (webhook_id, job_id, email_id, attempt, at, status, response_code, error, next_retry_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    trimLog: db.prepare(`DELETE FROM webhook_attempts WHERE webhook_id = ? AND seq <= (
      SELECT seq FROM webhook_attempts WHERE webhook_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`),
    expireLog: db.prepare('DELETE FROM webhook_attempts WHERE at <= ?'),
    sweepJobs: db.prepare('DELETE FROM webhook_jobs WHERE id IN (SELECT id FROM webhook_jobs WHERE expires_at <= ? LIMIT ?)'),
    attempts: db.prepare('SELECT * FROM webhook_attempts WHERE webhook_id = ? AND at > ? ORDER BY seq DESC LIMIT ?'),
    pending: db.prepare('SELECT count(*) FROM webhook_jobs WHERE webhook_id = ?').pluck(),
  };

  const add = db.transaction((h: WebhookRecord, caps: { perKey: number; perTarget: number }): AddResult => {
    if ((q.countByKey.get(h.keyHash) as number) >= caps.perKey) return 'key_full';
    if ((q.countByTarget.get(h.target) as number) >= caps.perTarget) return 'target_full';
    q.insert.run(h.id, h.keyHash, h.url, h.target, h.secret, h.createdAt);
    return 'added';
  });
  const remove = db.transaction((keyHash: string, id: string): boolean => {
    if (q.del.run(id, keyHash).changes === 0) return false;
    q.delJobs.run(id);
    return true;
  });
  const queueEvents = eventQueue(db);
  const enqueue = db.transaction((bodies: EventBody[], jobs: NewDeliveryJob[], caps: PendingCaps): DroppedJob[] => {
    const dropped: DroppedJob[] = [];
    queueEvents(
      jobs.map((j) => [j.id, j.webhookId, j.keyHash, j.emailId, j.dueAt, j.expiresAt]),
      bodies.map((b) => [b.emailId, b.payload, b.expiresAt]),
      caps,
      (pos, reason) => void dropped.push({ job: jobs[pos], reason }),
    );
    return dropped;
  });
  const claim = db.transaction((now: number, leaseMs: number, max: number, fair?: FairClaim): DeliveryJob[] => {
    // fair: keys at their share are left out by the query; a bounded window of the others' due jobs
    // (4 x max) is looked through, each key taking its room only
    const full = fair ? Object.entries(fair.held).filter(([, n]) => n >= fair.perKey).map(([k]) => k) : [];
    const window = q.due.all(now, now, JSON.stringify(full), fair ? max * 4 : max) as JobRow[];
    const room = new Map<string, number>();
    const rows: JobRow[] = [];
    for (const r of window) {
      if (rows.length >= max) break;
      if (fair) {
        const left = room.get(r.key_hash) ?? fair.perKey - (fair.held[r.key_hash] ?? 0);
        if (left <= 0) continue;
        room.set(r.key_hash, left - 1);
      }
      rows.push(r);
    }
    for (const r of rows) q.lease.run(now + leaseMs, r.id);
    return rows.map(toJob);
  });
  const writeLog = (webhookId: string, a: DeliveryAttempt) =>
    q.log.run(webhookId, a.jobId, a.emailId, a.attempt, a.at, a.status, a.responseCode, a.error, a.nextRetryAt);
  const finish = db.transaction((job: DeliveryJob, webhookId: string, a: DeliveryAttempt, retryAt: number | null) => {
    if (retryAt === null) q.done.run(job.id);
    else q.retry.run(a.attempt, retryAt, job.id);
    writeLog(webhookId, a);
    q.trimLog.run(webhookId, webhookId, ATTEMPTS_KEPT);
  });
  const appendLog = db.transaction((lines: { webhookId: string; attempt: DeliveryAttempt }[]) => {
    for (const l of lines) writeLog(l.webhookId, l.attempt);
    for (const id of new Set(lines.map((l) => l.webhookId))) q.trimLog.run(id, id, ATTEMPTS_KEPT);
  });
  const sweepBatch = db.transaction((now: number) => q.sweepJobs.run(now, SWEEP_BATCH).changes);

  /** Webhooks registered: with none, new mail asks the database nothing. */
  const registered = keptCount(() => q.countAll.get() as number);
  const recount = <T>(write: () => T): T => registered.after(write);

  return {
    addWebhook: (h, caps) => guard(() => recount(() => add.immediate(h, caps))),
    getWebhook: (id) => guard(() => {
      const r = q.get.get(id) as HookRow | undefined;
      return r ? toHook(r) : null;
    }),
    listWebhooks: (keyHash) => guard(() => (q.byKey.all(keyHash) as HookRow[]).map(toHook)),
    deleteWebhook: (keyHash, id) => guard(() => recount(() => remove.immediate(keyHash, id))),
    matching: (targets) => (registered.value === 0 ? Promise.resolve([]) : guard(() => targets.flatMap((t) => (q.byTarget.all(t) as HookRow[]).map(toHook)))),
    enqueue: (bodies, jobs, caps) => guard(() => (jobs.length ? enqueue.immediate(bodies, jobs, caps) : [])),
    // a poll that finds nothing due takes no write lock (it would wait for the writer thread's commits)
    claim: (now, leaseMs, max, fair) => guard(() => (q.anyDue.get(now, now) === undefined ? [] : claim.immediate(now, leaseMs, max, fair))),
    finish: (job, webhookId, a, retryAt) => guard(() => finish.immediate(job, webhookId, a, retryAt)),
    appendLog: (lines) => guard(() => { if (lines.length) appendLog.immediate(lines); }),
    listAttempts: (webhookId, limit, now) => guard(() => (q.attempts.all(webhookId, now - ATTEMPTS_TTL_MS, limit) as AttemptRow[]).map(toAttempt)),
    pendingCount: (webhookId) => guard(() => q.pending.get(webhookId) as number),
    async sweepExpired(now) {
      let removed = 0;
      for (;;) {
        const n = await guard(() => sweepBatch(now));
        removed += n;
        if (n < SWEEP_BATCH) break;
        await new Promise((r) => setImmediate(r));
      }
      await guard(() => q.expireLog.run(now - ATTEMPTS_TTL_MS)); // the delivery log's two hours (indexed on at)
      return removed;
    },
  };
}
