// Webhooks: registration by a key, and the delivery worker every node runs. Mail and its events are
// stored in one write before its 250 (ingest.ts, addWithEvents), so a crash loses no event and a
// failure stores neither; any node claims due jobs with a lease, so an event goes to one node at a
// time and a dead node's jobs come back when the lease runs out (at-least-once, once across nodes
// when nodes live). Signed with Standard Webhooks; retried on an
// exponential backoff for the email's lifetime (docs/push.md "Webhooks"). Fan-out is bounded
// (WEBHOOK_FANOUT): per message, per address, and by the events pending per key and per webhook;
// an event over a bound is dropped, counted and written in its webhook's delivery log.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../config.ts';
import { parseAddress } from '../domain/address.ts';
import type { Clock } from '../domain/clock.ts';
import { AppError } from '../domain/errors.ts';
import { WEBHOOK_FANOUT, shareFairly } from '../domain/limits.ts';
import type { Metrics } from '../metrics.ts';
import type { EmailSummary } from '../domain/summary.ts';
import type { KeyStore } from '../store/keys.ts';
import { summaryOf, type NewEmail, type StoredEmail } from '../store/store.ts';
import type { DeliveryAttempt, DeliveryJob, DroppedJob, MailEvents, MailEventJob, NewDeliveryJob, WebhookRecord, WebhookStore } from '../store/webhooks.ts';
import type { DomainRegistry } from './domains.ts';
import { boundedResolve, checkDestination, createWebhookAgents, postWebhook, systemResolve, type Resolve } from './webhook-send.ts';

/** A receiver has this long to answer. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** A claimed job is another node's again after this (a node that died mid-delivery). */
export const LEASE_MS = DELIVERY_TIMEOUT_MS + 5_000;
/** First retry after about 1 s, doubling, at most 10 minutes apart, for the email's lifetime. */
export const RETRY_FIRST_MS = 1000;
export const RETRY_MAX_MS = 10 * 60_000;
/** How often a node looks for due jobs (its own new mail wakes it at once). */
const POLL_MS = 500;

export interface WebhookInput {
  url: string;
  address: string;
}

export interface WebhookService {
  register(keyHash: string, input: WebhookInput): Promise<WebhookRecord>;
  list(keyHash: string): Promise<WebhookRecord[]>;
  remove(keyHash: string, id: string): Promise<void>;
  deliveries(keyHash: string, id: string, limit: number): Promise<{ webhook: WebhookRecord; attempts: DeliveryAttempt[]; pending: number }>;
  /**
   * Stores new mail with its webhook events in one write: `add` is the store's addEmails for these
   * emails, given the events (one per matching webhook for each email, within the fan-out limits
   * WEBHOOK_FANOUT; the rest are dropped, counted and logged), or none when no webhook matches. The
   * mail and its events are stored together or not at all; durable when it resolves.
   */
  addWithEvents(emails: NewEmail[], add: (events?: MailEvents) => Promise<StoredEmail[]>): Promise<StoredEmail[]>;
  /** Deliveries running on this node now. */
  readonly inFlight: number;
  start(): void;
  stop(): Promise<void>;
}

export interface WebhookDeps {
  /** Registrations and the delivery queue. */
  hooks: WebhookStore;
  /** Whether a webhook's key still stands (revoked: its events give up). */
  keys: Pick<KeyStore, 'findKey'>;
  config: Config;
  /** Which domains a webhook may watch (active ones). */
  domains: Pick<DomainRegistry, 'stateOf' | 'active'>;
  clock: Clock;
  log: Logger;
  metrics: Metrics | null;
  /** The JSON body of the event for a new email (the API's wire form: http/schemas/wire.ts). */
  eventJson(e: EmailSummary): string;
  /** DNS (tests inject answers; the default is the system resolver). */
  resolve?: Resolve;
  /**
   * Whether a key may watch a whole domain (`*@<domain>`), asked at registration and again for each
   * event. The default is the instance setting EPHEMAIL_WEBHOOK_WILDCARD for every key; the
   * operator's per-key grant (the admin API of a later issue) plugs in here.
   */
  mayWatchDomain?: (keyHash: string) => boolean | Promise<boolean>;
  random?: () => number;
}

const token = (bytes: number) => randomBytes(bytes).toString('base64url');

/** Delay before retry `n` (1 = after the first failure): doubling from 1 s, capped, ±20 % jitter. */
export function retryDelay(n: number, random: () => number = Math.random): number {
  const base = Math.min(RETRY_FIRST_MS * 2 ** Math.min(n - 1, 20), RETRY_MAX_MS);
  return Math.round(base * (0.8 + 0.4 * random()));
}

/** The `*@<domain>` target that covers an address. */
const wildcardOf = (address: string) => `*@${address.slice(address.lastIndexOf('@') + 1)}`;
const isWildcard = (target: string) => target.startsWith('*@');

/** Why an event was not queued, as its line in the delivery log says it. */
const DROPPED_BECAUSE: Record<DroppedJob['reason'] | 'message_limit', string> = {
  message_limit: `not queued: the message that brought this email had already queued ${WEBHOOK_FANOUT.eventsPerMessage} webhook events, the most one message may (all its recipients and webhooks together)`,
  hook_pending: `not queued: this webhook already has ${WEBHOOK_FANOUT.pendingPerHook} events waiting for delivery (its receiver is not keeping up); new events are dropped until some are delivered or given up`,
  key_pending: `not queued: this key's webhooks already have ${WEBHOOK_FANOUT.pendingPerKey} events waiting for delivery; new events are dropped until some are delivered or given up`,
};

/** Why a `*@<domain>` registration is refused, and what to do instead. */
export const WILDCARD_REFUSED = 'A *@<domain> webhook receives the mail of every inbox on the domain, which would void the unguessable addresses that keep public inboxes private, so this instance does not allow it. '
  + 'Register a webhook for one inbox address instead; an operator whose domains carry only their own mail can allow it with EPHEMAIL_WEBHOOK_WILDCARD=true';

/** The webhook target for an `address` field: a full address or `*@<domain>`, on an active domain. */
export function webhookTarget(domains: Pick<DomainRegistry, 'stateOf' | 'active'>, raw: string): string {
  const s = raw.trim().toLowerCase();
  const check = (domain: string) => {
    const state = domains.stateOf(domain);
    if (state === 'active') return;
    const why = state === 'retired' ? 'was retired: it takes no new mail' : 'is not a domain of this service';
    throw new AppError('invalid_request', `address ${JSON.stringify(raw.slice(0, 100))}: ${domain} ${why}; active domains: ${domains.active().join(', ')}`);
  };
  if (s.startsWith('*@')) {
    check(s.slice(2));
    return s;
  }
  const addr = parseAddress(s);
  if (!addr) throw new AppError('invalid_request', `address ${JSON.stringify(raw.slice(0, 100))} is neither an email address nor *@<domain>`);
  check(addr.domain);
  return addr.address;
}

export function createWebhookService(deps: WebhookDeps): WebhookService {
  const { hooks, keys, config, clock, log } = deps;
  const random = deps.random ?? Math.random;
  const mayWatchDomain = deps.mayWatchDomain ?? (() => config.webhooks.wildcard);
  // every lookup of a webhook's host (registration and delivery): 2 at a time on this node, 3 s each
  const resolve = boundedResolve(deps.resolve ?? systemResolve);
  const agents = createWebhookAgents();
  const max = config.webhooks.maxInFlight;
  /** Deliveries one key may run at once on this node: a quarter of them (docs/push.md "Fairness"). */
  const keyShare = Math.max(1, Math.floor(max / 4));
  const byKey = new Map<string, number>();
  let timer: NodeJS.Timeout | null = null;
  let ticking = false;
  let again = false;
  let stopped = false;
  const running = new Set<Promise<void>>();
  const outcomes = deps.metrics?.webhookDeliveries;
  const seconds = deps.metrics?.webhookSeconds;
  const queuedEvents = deps.metrics?.webhookQueued;
  const droppedEvents = deps.metrics?.webhookDropped;
  const caps = { perKey: WEBHOOK_FANOUT.pendingPerKey, perHook: WEBHOOK_FANOUT.pendingPerHook };

  async function deliver(job: DeliveryJob): Promise<void> {
    const attempt = job.attempts + 1;
    const hook = await hooks.getWebhook(job.webhookId);
    const key = hook && (await keys.findKey(hook.keyHash));
    const t0 = performance.now();
    let status: DeliveryAttempt['status'];
    let responseCode: number | null = null;
    let error: string | null = null;
    let retryAt: number | null = null;
    if (!hook || !key || key.revokedAt !== null) {
      status = 'gave_up';
      error = !hook ? 'the webhook was deleted' : 'the webhook\'s API key was revoked';
    } else if (job.payload === '' || job.expiresAt <= clock.now()) {
      status = 'gave_up';
      error = 'the email expired before the event could be delivered';
    } else {
      const sentAt = new Date(clock.now());
      const signature = new Webhook(hook.secret).sign(job.id, sentAt, job.payload);
      const r = await postWebhook(hook.url, {
        'webhook-id': job.id,
        'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
        'webhook-signature': signature,
      }, job.payload, { allowPrivate: config.webhooks.allowPrivate, timeoutMs: DELIVERY_TIMEOUT_MS, resolve, agents });
      responseCode = r.status;
      error = r.error;
      const now = clock.now();
      if (r.error === null) status = 'delivered';
      else if (r.refused) status = 'gave_up';
      else {
        const next = now + retryDelay(attempt, random);
        if (next < job.expiresAt) {
          status = 'retrying';
          retryAt = next;
        } else status = 'gave_up';
      }
    }
    seconds?.observe((performance.now() - t0) / 1000);
    outcomes?.labels(status).inc();
    const record: DeliveryAttempt = { jobId: job.id, emailId: job.emailId, attempt, at: clock.now(), status, responseCode, error, nextRetryAt: retryAt };
    if (status !== 'delivered') log.info({ webhook_id: job.webhookId, event_id: job.id, attempt, status, response_code: responseCode, error }, 'webhook delivery failed');
    await hooks.finish(job, job.webhookId, record, retryAt);
  }

  async function tick(): Promise<void> {
    if (ticking) {
      again = true;
      return;
    }
    ticking = true;
    try {
      do {
        again = false;
        while (!stopped && running.size < max) {
          // a key holds at most its share of this node's deliveries: its jobs past that are left
          // due, so one key's slow receiver cannot keep another key's events waiting
          const room = Math.min(max - running.size, 50);
          const jobs = await hooks.claim(clock.now(), LEASE_MS, room, { perKey: keyShare, held: Object.fromEntries(byKey) });
          for (const job of jobs) {
            byKey.set(job.keyHash, (byKey.get(job.keyHash) ?? 0) + 1);
            const p = deliver(job)
              .catch((err) => log.warn({ err, event_id: job.id }, 'webhook delivery not recorded; it is retried when its lease ends'))
              .finally(() => {
                running.delete(p);
                const n = (byKey.get(job.keyHash) ?? 1) - 1;
                if (n <= 0) byKey.delete(job.keyHash);
                else byKey.set(job.keyHash, n);
                if (!stopped) void tick();
              });
            running.add(p);
          }
          if (jobs.length < room) break;
        }
      } while (again && !stopped);
    } catch (err) {
      log.warn({ err }, 'webhook queue not reachable; trying again');
    } finally {
      ticking = false;
    }
  }

  /**
   * The events new mail makes, before it is stored (its ids are the store's): one job per matching
   * webhook and email within the per-message share, each body as pieces around a random stand-in for
   * the id. Null when no webhook matches.
   */
  async function eventsOf(emails: NewEmail[]): Promise<{ events: MailEvents; left: MailEventJob[]; now: number } | null> {
    const targets = new Set<string>();
    for (const e of emails) targets.add(e.address).add(wildcardOf(e.address));
    const found = await hooks.matching([...targets]);
    if (found.length === 0) return null;
    // a *@<domain> webhook stored while it was allowed gets nothing once its key may no longer have it
    const allowed = new Map<string, boolean>();
    for (const h of found) if (isWildcard(h.target) && !allowed.has(h.keyHash)) allowed.set(h.keyHash, await mayWatchDomain(h.keyHash));
    const matched = found.filter((h) => !isWildcard(h.target) || allowed.get(h.keyHash));
    if (matched.length === 0) return null;
    const now = clock.now();
    // every event the message could make; the oldest webhooks first, so a key's turn in the
    // per-message share comes from its oldest matching webhook
    matched.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
    const candidates: MailEventJob[] = [];
    for (const h of matched) {
      emails.forEach((e, i) => {
        if (h.target !== e.address && h.target !== wildcardOf(e.address)) return;
        candidates.push({ id: `msg_${token(15)}`, webhookId: h.id, keyHash: h.keyHash, email: i, dueAt: now, expiresAt: e.expiresAt });
      });
    }
    const { taken, left } = shareFairly(candidates, (j) => j.keyHash, WEBHOOK_FANOUT.eventsPerMessage);
    // the body names the email's id, which the store assigns as it writes: a random stand-in (no
    // subject or address can contain it) marks where the id goes
    const standIn = randomUUID();
    const bodies = new Map<number, string[]>();
    for (const j of taken) if (!bodies.has(j.email)) bodies.set(j.email, deps.eventJson(summaryOf(standIn, emails[j.email])).split(standIn));
    return { events: { jobs: taken, bodies, caps }, left, now };
  }

  /** Once the mail and its events are stored: counts, the dropped events' log lines, the deliverer woken. */
  function afterwards({ events, left, now }: { events: MailEvents; left: MailEventJob[]; now: number }, stored: EmailSummary[]): void {
    const refused = events.dropped ?? [];
    const taken = events.jobs.length;
    queuedEvents?.inc(taken - refused.length);
    const withId = ({ email, ...j }: MailEventJob): NewDeliveryJob => ({ ...j, emailId: stored[email].id });
    const dropped = [...left.map((j) => ({ job: withId(j), reason: 'message_limit' as const })), ...refused];
    if (dropped.length > 0) {
      const counts: Record<string, number> = {};
      for (const d of dropped) counts[d.reason] = (counts[d.reason] ?? 0) + 1;
      for (const [reason, n] of Object.entries(counts)) droppedEvents?.labels(reason).inc(n);
      log.info({ dropped: counts, queued: taken - refused.length }, 'webhook events dropped (fan-out limits)');
      // the log lines are for the keys to see; failing to write them must not refuse the mail (stored)
      hooks.appendLog(dropped.map(({ job, reason }) => ({
        webhookId: job.webhookId,
        attempt: { jobId: job.id, emailId: job.emailId, attempt: 0, at: now, status: 'dropped' as const, responseCode: null, error: DROPPED_BECAUSE[reason], nextRetryAt: null },
      }))).catch((err) => log.warn({ err }, 'dropped webhook events not written to their logs'));
    }
    if (events.deferred) log.warn({ events: taken }, 'webhook events stored with the mail but not queued yet (the queue did not answer); the store\'s sweep queues them');
    else if (taken > refused.length && !stopped) setImmediate(() => void tick());
  }

  async function owned(keyHash: string, id: string): Promise<WebhookRecord> {
    const hook = typeof id === 'string' && id.length <= 100 ? await hooks.getWebhook(id) : null;
    if (!hook || hook.keyHash !== keyHash) throw new AppError('not_found', `No webhook ${JSON.stringify(String(id).slice(0, 100))} belongs to this key`);
    return hook;
  }

  return {
    get inFlight() {
      return running.size;
    },
    async register(keyHash, input) {
      const target = webhookTarget(deps.domains, input.address);
      if (isWildcard(target) && !(await mayWatchDomain(keyHash))) throw new AppError('forbidden', WILDCARD_REFUSED);
      const refused = await checkDestination(input.url, config.webhooks.allowPrivate, resolve);
      if (refused) throw new AppError('invalid_request', refused);
      const record: WebhookRecord = {
        id: `wh_${token(15)}`, keyHash, url: input.url, target, secret: `whsec_${randomBytes(24).toString('base64')}`, createdAt: clock.now(),
      };
      const added = await hooks.addWebhook(record, { perKey: config.webhooks.perKey, perTarget: WEBHOOK_FANOUT.hooksPerAddress });
      if (added === 'key_full') {
        throw new AppError('too_many_webhooks', `This key already has ${config.webhooks.perKey} webhooks; delete one first`, { hint: { kind: 'delete_webhook' } });
      }
      if (added === 'target_full') {
        throw new AppError('too_many_webhooks', `${target} is already watched by ${WEBHOOK_FANOUT.hooksPerAddress} webhooks (all keys together), the most one address may have: it bounds how far one email fans out`);
      }
      return record;
    },
    list: (keyHash) => hooks.listWebhooks(keyHash),
    async remove(keyHash, id) {
      if (!(await hooks.deleteWebhook(keyHash, id))) await owned(keyHash, id);
    },
    async deliveries(keyHash, id, limit) {
      const webhook = await owned(keyHash, id);
      const [attempts, pending] = await Promise.all([hooks.listAttempts(id, limit, clock.now()), hooks.pendingCount(id)]);
      return { webhook, attempts, pending };
    },
    async addWithEvents(emails, add) {
      const events = emails.length ? await eventsOf(emails) : null;
      if (!events) return add();
      const stored = await add(events.events);
      afterwards(events, stored);
      return stored;
    },
    start() {
      if (timer) return;
      timer = setInterval(() => void tick(), POLL_MS);
      timer.unref();
      void tick();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      // deliveries running finish if they can within a second; the rest are leased and come back
      const settled = Promise.allSettled([...running]);
      await Promise.race([settled, new Promise((r) => setTimeout(r, 1000).unref())]);
      // kept-alive connections close once no delivery uses them (one still running keeps its own)
      void settled.then(() => agents.destroy());
    },
  };
}
