// The webhook seam of the Store: registrations owned by an API key, and a durable delivery queue
// that any node may work (docs/push.md "Webhooks"). Backends: sqlite/webhooks.ts, redis/webhooks.ts;
// both pass test/conformance/webhooks.suite.ts. Times are epoch ms, passed in. The caps (webhooks per
// address, events pending per key and per webhook) are enforced here, atomically, since only the
// store sees every node's registrations and queue.

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

/** The JSON body of one email's event: stored once, however many webhooks the email goes to. */
export interface EventBody {
  emailId: string;
  payload: string;
  /** The email's expiry; the body goes with its last job, or is swept after this. */
  expiresAt: number;
}

/** One event to queue for one webhook; its id is the `webhook-id` header, the same on every retry. */
export interface NewDeliveryJob {
  id: string;
  webhookId: string;
  /** The webhook's key (WebhookRecord.keyHash): pending events are counted per key. */
  keyHash: string;
  /** Its body is this email's EventBody. */
  emailId: string;
  /** When it is due (or, while leased, when the lease ends). */
  dueAt: number;
  /** After this it is never claimed and the sweep deletes it (the email's lifetime). */
  expiresAt: number;
}

/** A queued event as claim() returns it. */
export interface DeliveryJob extends NewDeliveryJob {
  /** The email's event body (every attempt sends the same bytes); '' if it is gone. */
  payload: string;
  /** Attempts made so far. */
  attempts: number;
}

/** How claim() shares a node's deliveries between keys. */
export interface FairClaim {
  /** Deliveries one key may run at once on the node. */
  perKey: number;
  /** What each key runs now (keys not named run none). */
  held: Readonly<Record<string, number>>;
}

/** Events one key, and one webhook, may have queued (waiting or leased) at once. */
export interface PendingCaps {
  perKey: number;
  perHook: number;
}

/**
 * New mail's webhook events, given to addEmails (store.ts) to be written in the same atomic write as
 * the mail: the mail and its events are stored together or not at all (docs/push.md "Webhooks"). The
 * email ids are the store's, assigned in that write, so each job names its email by position and each
 * body is given in pieces that the store joins with the email's id.
 */
export interface MailEvents {
  /** One per event, queued as enqueue() queues (in order, each under the caps). */
  jobs: MailEventJob[];
  /** By email position: the event body as pieces, to be joined with that email's id (`pieces.join(id)`). */
  bodies: Map<number, string[]>;
  caps: PendingCaps;
  /** Filled in by addEmails once written: the jobs refused for a cap (nothing stored for them). */
  dropped?: DroppedJob[];
  /**
   * Set by addEmails when the events were stored with the mail but could not be queued yet (Redis:
   * the queue's slot failed after the mail's write); the store's sweep queues them later.
   */
  deferred?: boolean;
}

/** A job of MailEvents: a NewDeliveryJob whose email is the one at position `email` of addEmails' list. */
export interface MailEventJob extends Omit<NewDeliveryJob, 'emailId'> {
  email: number;
}

/** The body of an event, its pieces joined with its email's id. */
export const bodyFor = (pieces: string[], emailId: string): string => pieces.join(emailId);

/** A job enqueue() refused: its webhook (checked first) or its key already had its cap pending. */
export interface DroppedJob {
  job: NewDeliveryJob;
  reason: 'hook_pending' | 'key_pending';
}

/** What addWebhook() did: added, or refused because the key or the target already has its cap. */
export type AddResult = 'added' | 'key_full' | 'target_full';

/** `dropped`: the event was never queued (a fan-out limit); attempt is 0 and nothing was sent. */
export type DeliveryStatus = 'delivered' | 'retrying' | 'gave_up' | 'dropped';

/** One attempt, as GET /webhooks/{id}/deliveries shows it. */
export interface DeliveryAttempt {
  jobId: string;
  emailId: string;
  /** 1 for the first attempt; 0 for an event that was dropped before any attempt. */
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
  /**
   * Registers the webhook unless its key already has `perKey` webhooks or its target (an address,
   * or `*@domain`) is already watched by `perTarget`, all keys together; atomic.
   */
  addWebhook(hook: WebhookRecord, caps: { perKey: number; perTarget: number }): Promise<AddResult>;
  getWebhook(id: string): Promise<WebhookRecord | null>;
  /** The key's webhooks, oldest first. */
  listWebhooks(keyHash: string): Promise<WebhookRecord[]>;
  /** Removes the key's webhook (and its pending deliveries); false when the key has no such webhook. */
  deleteWebhook(keyHash: string, id: string): Promise<boolean>;
  /** Webhooks whose target is one of these (addresses and `*@domain`), in any order. */
  matching(targets: string[]): Promise<WebhookRecord[]>;
  /**
   * Queues jobs durably (resolves once a crash can no longer lose them), each email's body once, in
   * one atomic step. Jobs are taken in order; one whose webhook already has `caps.perHook` events
   * pending, or whose key has `caps.perKey`, is refused and returned (nothing stored for it). A job
   * id already queued is neither queued again nor refused. A body none of whose jobs was queued is
   * not kept.
   */
  enqueue(bodies: EventBody[], jobs: NewDeliveryJob[], caps: PendingCaps): Promise<DroppedJob[]>;
  /**
   * Takes up to `max` jobs due at `now` and leases them until now + leaseMs: no other caller gets
   * them before then (once across nodes); a lease that runs out makes the job due again (a node that
   * died with it). Jobs are returned with their attempt count as stored, and their email's body. A
   * job past its expiresAt is never returned (the sweep, or this call, deletes it).
   */
  // fair: no key gets more than `perKey` less what it `held` already (its deliveries running on this
  // node); its other due jobs are left for later, so one key's slow receiver cannot take every slot.
  claim(now: number, leaseMs: number, max: number, fair?: FairClaim): Promise<DeliveryJob[]>;
  /**
   * Records an attempt of a claimed job: retryAt null removes the job (delivered or given up),
   * otherwise it is due again at retryAt with attempts = attempt.attempt.
   */
  finish(job: DeliveryJob, webhookId: string, attempt: DeliveryAttempt, retryAt: number | null): Promise<void>;
  /** Adds lines to webhooks' delivery logs (dropped events) without touching the queue; bounded as finish()'s. */
  appendLog(lines: { webhookId: string; attempt: DeliveryAttempt }[]): Promise<void>;
  /** Attempts of a webhook made in the last ATTEMPTS_TTL_MS before `now`, newest first, at most `limit`. */
  listAttempts(webhookId: string, limit: number, now: number): Promise<DeliveryAttempt[]>;
  /** Jobs queued for a webhook now (waiting or leased). */
  pendingCount(webhookId: string): Promise<number>;
  /**
   * Deletes jobs whose expiresAt <= now, leased or not, with the bodies they alone referenced (and,
   * where the backend keeps it in rows, the log older than ATTEMPTS_TTL_MS); in bounded batches.
   * Store.sweepExpired calls it. Returns how many jobs.
   */
  sweepExpired(now: number): Promise<number>;
}
