// Webhook events queued under the fan-out caps, in the caller's transaction: one rule and one set of
// statements wherever SQLite queues events (new mail's, on the writer thread: write-ops.ts; the
// others', on the main connection: webhooks.ts enqueue).
import type Database from 'better-sqlite3';

/** Why a cap refused an event: its webhook's, or its key's, pending deliveries are at the cap. */
export type EventRefusal = 'hook_pending' | 'key_pending';
/** A job to queue: [id, webhookId, keyHash, emailId, dueAt, expiresAt]. */
export type EventRow = [string, string, string, string, number, number];
/** An email's event body: [emailId, payload, expiresAt]. */
export type EventBodyRow = [string, string, number];

/**
 * Prepares the statements on `db` and returns the queuing: each job not queued yet (by id) is queued
 * unless its webhook already has `perHook` pending deliveries or its key `perKey` (counting the ones
 * queued here); `refused(pos, why)` is told of each job a cap refused; the bodies of the emails that
 * got at least one job are stored once.
 */
export function eventQueue(db: Database.Database) {
  const q = {
    jobExists: db.prepare('SELECT 1 FROM webhook_jobs WHERE id = ?').pluck(),
    pendingByHook: db.prepare('SELECT count(*) FROM webhook_jobs WHERE webhook_id = ?').pluck(),
    pendingByKey: db.prepare('SELECT count(*) FROM webhook_jobs WHERE key_hash = ?').pluck(),
    enqueue: db.prepare('INSERT INTO webhook_jobs (id, webhook_id, key_hash, email_id, attempts, due_at, leased, expires_at) VALUES (?, ?, ?, ?, 0, ?, 0, ?)'),
    putBody: db.prepare('INSERT OR IGNORE INTO webhook_payloads (email_id, payload, expires_at) VALUES (?, ?, ?)'),
  };
  return (jobs: readonly EventRow[], bodies: readonly EventBodyRow[], caps: { perKey: number; perHook: number }, refused: (pos: number, why: EventRefusal) => void): void => {
    const byHook = new Map<string, number>();
    const byKey = new Map<string, number>();
    const used = new Set<string>();
    jobs.forEach(([id, hook, key, email, due, expires], pos) => {
      if (q.jobExists.get(id) !== undefined) return;
      const h = byHook.get(hook) ?? (q.pendingByHook.get(hook) as number);
      if (h >= caps.perHook) return refused(pos, 'hook_pending');
      const k = byKey.get(key) ?? (q.pendingByKey.get(key) as number);
      if (k >= caps.perKey) return refused(pos, 'key_pending');
      q.enqueue.run(id, hook, key, email, due, expires);
      byHook.set(hook, h + 1);
      byKey.set(key, k + 1);
      used.add(email);
    });
    for (const [email, payload, expires] of bodies) if (used.has(email)) q.putBody.run(email, payload, expires);
  };
}
