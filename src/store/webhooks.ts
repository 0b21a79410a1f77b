// The webhook seam of the Store: registrations owned by an API key, and a durable delivery queue
// that any node may work (docs/push.md "Webhooks"). Backends: sqlite/webhooks.ts, redis/webhooks.ts;
// both pass test/conformance/webhooks.suite.ts. Times are epoch ms, passed in.

export interface WebhookRecord {
  /** `wh_` + random. */
  id: string;
  /** SHA-256 of the owning API key (KeyRecord.hash). */
  keyHash: string;
  url: string;
  /** A lowercase inbox address, or `*@<domain>` for every inbox of an active domain. */
  target: string;
  /** `whsec_…` (Standard Webhooks); needed to sign, so it is kept as given. */
  secret: string;
  createdAt: number;
}

/** One event to deliver to one webhook; its id is the `webhook-id` header, the same on every retry. */
export interface DeliveryJob {
  id: string;
  webhookId: string;
  emailId: string;
  /** The JSON body, fixed at enqueue (every attempt sends the same bytes). */
  payload: string;
  /** Attempts made so far. */
  attempts: number;
  /** When it is due (or, while leased, when the lease ends). */
  dueAt: number;
  /** After this it is given up (the email's lifetime). */
  expiresAt: number;
}

export type DeliveryStatus = 'delivered' | 'retrying' | 'gave_up';

/** One attempt, as GET /webhooks/{id}/deliveries shows it. */
export interface DeliveryAttempt {
  jobId: string;
  emailId: string;
  /** 1 for the first attempt. */
  attempt: number;
  at: number;
  status: DeliveryStatus;
  /** The receiver's HTTP status, or null when there was no response. */
  responseCode: number | null;
  /** Why it failed (timeout, refused address, connection error, non-2xx), or null. */
  error: string | null;
  nextRetryAt: number | null;
}

/** Attempts kept per webhook (newest first). */
export const ATTEMPTS_KEPT = 100;
/** How long an attempt stays listed. */
export const ATTEMPTS_TTL_MS = 2 * 60 * 60 * 1000;

export interface WebhookStore {
  /** Registers the webhook unless its key already has `maxPerKey`; atomic. */
  addWebhook(hook: WebhookRecord, maxPerKey: number): Promise<boolean>;
  getWebhook(id: string): Promise<WebhookRecord | null>;
  /** The key's webhooks, oldest first. */
  listWebhooks(keyHash: string): Promise<WebhookRecord[]>;
  /** Removes the key's webhook (and its pending deliveries); false when the key has no such webhook. */
  deleteWebhook(keyHash: string, id: string): Promise<boolean>;
  /** Webhooks whose target is one of these (addresses and `*@domain`), in any order. */
  matching(targets: string[]): Promise<WebhookRecord[]>;
  /** Queues deliveries durably: resolves once a crash can no longer lose them. */
  enqueue(jobs: DeliveryJob[]): Promise<void>;
  /**
   * Takes up to `max` jobs due at `now` and leases them until now + leaseMs: no other caller gets
   * them before then (once across nodes); a lease that runs out makes the job due again (a node that
   * died with it). Jobs are returned with their attempt count as stored.
   */
  claim(now: number, leaseMs: number, max: number): Promise<DeliveryJob[]>;
  /**
   * Records an attempt of a claimed job: retryAt null removes the job (delivered or given up),
   * otherwise it is due again at retryAt with attempts = attempt.attempt.
   */
  finish(job: DeliveryJob, webhookId: string, attempt: DeliveryAttempt, retryAt: number | null): Promise<void>;
  /** Attempts of a webhook made in the last ATTEMPTS_TTL_MS before `now`, newest first, at most `limit`. */
  listAttempts(webhookId: string, limit: number, now: number): Promise<DeliveryAttempt[]>;
  /** Jobs queued for a webhook now (waiting or leased). */
  pendingCount(webhookId: string): Promise<number>;
}
