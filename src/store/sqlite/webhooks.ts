// Webhooks on SQLite: registrations, the delivery queue and the attempt log in the store's file,
// written on the main connection (small rows; synchronous=FULL, so enqueue is durable when it
// returns). One process owns the file, so a lease is only a flag: at start every lease is dropped.
import type Database from 'better-sqlite3';
import { ATTEMPTS_KEPT, ATTEMPTS_TTL_MS, type DeliveryAttempt, type DeliveryJob, type WebhookRecord, type WebhookStore } from '../webhooks.ts';

interface HookRow { id: string; key_hash: string; url: string; target: string; secret: string; created_at: number }
interface JobRow { id: string; webhook_id: string; email_id: string; payload: string; attempts: number; due_at: number; expires_at: number }
interface AttemptRow { job_id: string; email_id: string; attempt: number; at: number; status: DeliveryAttempt['status']; response_code: number | null; error: string | null; next_retry_at: number | null }

const toHook = (r: HookRow): WebhookRecord => ({ id: r.id, keyHash: r.key_hash, url: r.url, target: r.target, secret: r.secret, createdAt: r.created_at });
const toJob = (r: JobRow): DeliveryJob => ({ id: r.id, webhookId: r.webhook_id, emailId: r.email_id, payload: r.payload, attempts: r.attempts, dueAt: r.due_at, expiresAt: r.expires_at });
const toAttempt = (r: AttemptRow): DeliveryAttempt => ({
  jobId: r.job_id, emailId: r.email_id, attempt: r.attempt, at: r.at, status: r.status, responseCode: r.response_code, error: r.error, nextRetryAt: r.next_retry_at,
});

/** The webhook store, and `expireAttempts(now)` for the store's sweep (drops the log older than ATTEMPTS_TTL_MS). */
export function createSqliteWebhooks(db: Database.Database, guard: <T>(fn: () => T) => Promise<T>): WebhookStore & { expireAttempts(now: number): number } {
  db.prepare('UPDATE webhook_jobs SET leased = 0 WHERE leased = 1').run(); // this process owns the file now
  const q = {
    countByKey: db.prepare('SELECT count(*) FROM webhooks WHERE key_hash = ?').pluck(),
    insert: db.prepare('INSERT INTO webhooks (id, key_hash, url, target, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
    get: db.prepare('SELECT * FROM webhooks WHERE id = ?'),
    byKey: db.prepare('SELECT * FROM webhooks WHERE key_hash = ? ORDER BY created_at ASC, id ASC'),
    del: db.prepare('DELETE FROM webhooks WHERE id = ? AND key_hash = ?'),
    delJobs: db.prepare('DELETE FROM webhook_jobs WHERE webhook_id = ?'),
    byTarget: db.prepare('SELECT * FROM webhooks WHERE target = ?'),
    enqueue: db.prepare('INSERT OR IGNORE INTO webhook_jobs (id, webhook_id, email_id, payload, attempts, due_at, leased, expires_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)'),
    due: db.prepare('SELECT * FROM webhook_jobs WHERE due_at <= ? ORDER BY due_at ASC LIMIT ?'),
    lease: db.prepare('UPDATE webhook_jobs SET leased = 1, due_at = ? WHERE id = ?'),
    done: db.prepare('DELETE FROM webhook_jobs WHERE id = ?'),
    retry: db.prepare('UPDATE webhook_jobs SET leased = 0, attempts = ?, due_at = ? WHERE id = ?'),
    log: db.prepare(`INSERT INTO webhook_attempts (webhook_id, job_id, email_id, attempt, at, status, response_code, error, next_retry_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    trimLog: db.prepare(`DELETE FROM webhook_attempts WHERE webhook_id = ? AND seq <= (
      SELECT seq FROM webhook_attempts WHERE webhook_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`),
    expireLog: db.prepare('DELETE FROM webhook_attempts WHERE at <= ?'),
    attempts: db.prepare('SELECT * FROM webhook_attempts WHERE webhook_id = ? AND at > ? ORDER BY seq DESC LIMIT ?'),
    pending: db.prepare('SELECT count(*) FROM webhook_jobs WHERE webhook_id = ?').pluck(),
  };

  const add = db.transaction((h: WebhookRecord, max: number): boolean => {
    if ((q.countByKey.get(h.keyHash) as number) >= max) return false;
    q.insert.run(h.id, h.keyHash, h.url, h.target, h.secret, h.createdAt);
    return true;
  });
  const remove = db.transaction((keyHash: string, id: string): boolean => {
    if (q.del.run(id, keyHash).changes === 0) return false;
    q.delJobs.run(id);
    return true;
  });
  const enqueue = db.transaction((jobs: DeliveryJob[]) => {
    for (const j of jobs) q.enqueue.run(j.id, j.webhookId, j.emailId, j.payload, j.attempts, j.dueAt, j.expiresAt);
  });
  const claim = db.transaction((now: number, leaseMs: number, max: number): DeliveryJob[] => {
    const rows = q.due.all(now, max) as JobRow[];
    for (const r of rows) q.lease.run(now + leaseMs, r.id);
    return rows.map(toJob);
  });
  const finish = db.transaction((job: DeliveryJob, webhookId: string, a: DeliveryAttempt, retryAt: number | null) => {
    if (retryAt === null) q.done.run(job.id);
    else q.retry.run(a.attempt, retryAt, job.id);
    q.log.run(webhookId, a.jobId, a.emailId, a.attempt, a.at, a.status, a.responseCode, a.error, a.nextRetryAt);
    q.trimLog.run(webhookId, webhookId, ATTEMPTS_KEPT);
  });

  return {
    addWebhook: (h, max) => guard(() => add(h, max)),
    getWebhook: (id) => guard(() => {
      const r = q.get.get(id) as HookRow | undefined;
      return r ? toHook(r) : null;
    }),
    listWebhooks: (keyHash) => guard(() => (q.byKey.all(keyHash) as HookRow[]).map(toHook)),
    deleteWebhook: (keyHash, id) => guard(() => remove(keyHash, id)),
    matching: (targets) => guard(() => targets.flatMap((t) => (q.byTarget.all(t) as HookRow[]).map(toHook))),
    enqueue: (jobs) => guard(() => { if (jobs.length) enqueue(jobs); }),
    claim: (now, leaseMs, max) => guard(() => claim(now, leaseMs, max)),
    finish: (job, webhookId, a, retryAt) => guard(() => finish(job, webhookId, a, retryAt)),
    listAttempts: (webhookId, limit, now) => guard(() => (q.attempts.all(webhookId, now - ATTEMPTS_TTL_MS, limit) as AttemptRow[]).map(toAttempt)),
    pendingCount: (webhookId) => guard(() => q.pending.get(webhookId) as number),
    expireAttempts: (now) => q.expireLog.run(now - ATTEMPTS_TTL_MS).changes,
  };
}
