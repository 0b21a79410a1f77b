// Authentication verdicts (SPF, DKIM, DMARC, ARC): a derived view of a stored message, computed once
// with mailauth on a worker thread of its own (derive/authenticate.ts), within a time budget, kept in
// the store beside the message and never computed again. Ingest hands over the bytes it holds once
// they are stored, just before the 250 is written (scheduleMessage: the 250 never waits for the
// verdicts; nothing is read back from the store);
// the worker runs at a lower CPU priority, so under load ingest comes first and the verdicts take
// what is left. A read of a message that has none yet schedules it too (another node stored it,
// this one restarted, or the queue was full) and answers `null` meanwhile.
// docs/authentication.md has the design.
import type { Logger } from 'pino';
import { domainOf, temperrorVerdict } from '../domain/authentication.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Authentication, AuthTask } from '../derive/authenticate.ts';
import type { ParseLimits } from '../derive/mime.ts';
import { createLane, LANE_WORKERS, type Lane } from '../derive/pool.ts';
import { verdictsInput } from '../derive/authentication-view.ts';
import { AUTH_BUDGET, AUTHENTICATION_VIEW } from '../derive/registry.ts';
import type { MailStore, MessageEnvelope } from '../store/store.ts';
import { createBurstGauge, createDeriveQueue } from './derive-queue.ts';
import { collect } from './views.ts';

export type { Authentication } from '../derive/authenticate.ts';

/** Verdicts computed at once (they mostly wait on DNS), and waiting; more are dropped (a read asks again). */
export const MAX_RUNNING = 16;
const MAX_WAITING = 1000;
/**
 * Verdicts of new mail computing at once for one client (an IPv4 address, an IPv6 /64) and for one
 * envelope domain (MAIL FROM's, else HELO's) (issue 35 finding 3): a verdict asks DNS at most
 * VERDICT_LOOKUPS (derive/authenticate.ts: 112 for SPF, 40 for the rest), so one sender's mail has
 * at most 2 × 152 lookups asked at a time, and a burst of N messages at most N × 152 in all. Theirs
 * wait, passed over in the queue by other senders' verdicts. One a read asks for is not held back.
 */
export const MAX_RUNNING_PER_SENDER = 2;
/** Bytes of messages held by waiting verdicts; past it a verdict reads its message back when it runs. */
const MAX_HELD_BYTES = 32 * 1024 * 1024;
/**
 * Ingest is busy while more than this many messages were stored in one of the last two windows of
 * BUSY_WINDOW_MS (80 a second): verdicts of new mail then wait for a quieter moment, so under a
 * burst they take no CPU from ingest (a verdict costs about a quarter of a millisecond of CPU for
 * a small signed message, as much as storing it). A verdict a reader asked for never waits.
 */
export const BUSY_MESSAGES = 20;
export const BUSY_WINDOW_MS = 250;

export interface AuthenticationService {
  /**
   * Computes the verdicts of a message just stored, in the background, from the bytes ingest holds
   * (read back from the store only when they were handed on meanwhile or too many are waiting).
   */
  scheduleMessage(messageKey: string, raw: Uint8Array, envelope: MessageEnvelope): void;
  /**
   * The kept verdicts of a message, or null (none yet; or none ever). A message received more than
   * its budget and a second ago that has none gets them scheduled here (its ingest's job was lost: a
   * node stopped, a queue was full); a younger one is left to the node that stored it.
   */
  get(messageKey: string, receivedAt: number): Promise<Authentication | null>;
  /** Resolves once no verdict is computing or waiting (tests, shutdown). */
  idle(): Promise<void>;
  readonly waiting: number;
  /** Whether scheduleMessage takes a new message now (else it is dropped: the queue is full; a read asks again). */
  readonly accepting: boolean;
  /** Whether scheduleMessage would keep `bytes` given bytes now (else it reads the message back when its turn comes). */
  holds(bytes: number): boolean;
  /** Starts the worker ahead of the first message (called once the service listens). */
  warm(): void;
  close(): Promise<void>;
}

export interface AuthenticationOptions {
  /** EPHEMAIL_DNS_SERVERS; empty: the system's resolvers. */
  dnsServers: readonly string[];
  /** The authserv-id of the Authentication-Results value. */
  authservId: string;
  budgetMs?: number;
  queryTimeoutMs?: number;
  /** The `verdicts` lane of the service's pool (assemble.ts); absent: a lane of its own, closed with the service. */
  pool?: Lane;
  now?: () => number;
  /** Real-time milliseconds for the busy windows (default performance.now; a test moves its own). */
  monotonic?: () => number;
  /** Observes each verdict: seconds taken and the SPF result (metrics, tests). */
  onComputed?: (seconds: number, verdict: Authentication) => void;
}

function parseVerdicts(json: string | null): Authentication | null {
  if (!json) return null;
  try {
    const v = JSON.parse(json) as Authentication;
    return v && typeof v === 'object' && v.spf && Array.isArray(v.dkim) ? v : null;
  } catch {
    return null;
  }
}


export function createAuthenticationService(store: MailStore, limits: ParseLimits, log: Logger, options: AuthenticationOptions): AuthenticationService {
  // one worker: verdicts wait on DNS far more than they compute, so one thread runs many at once
  // at a lower CPU priority: verdicts are on no 250's path, so under load ingest comes first
  const ownLane = options.pool ? null : createLane({ name: 'verdicts', workers: LANE_WORKERS.verdicts, preload: 'authenticate', background: true, warn: (msg, err) => log.warn({ err }, msg) });
  const pool = options.pool ?? ownLane!;
  const budgetMs = options.budgetMs ?? AUTH_BUDGET.totalMs;
  const queryTimeoutMs = Math.min(options.queryTimeoutMs ?? AUTH_BUDGET.queryMs, budgetMs);
  const now = options.now ?? Date.now;
  /** Keys queued or computing (a message is computed once at a time). */
  const known = new Set<string>();
  /** Verdicts computed and not yet written. */
  let writing = 0;
  let closed = false;
  let idleWaiters: (() => void)[] = [];
  const settle = () => {
    if (queue.running !== 0 || queue.waiting !== 0 || writing !== 0) return;
    const w = idleWaiters;
    idleWaiters = [];
    for (const f of w) f();
  };
  // messages stored per window of BUSY_WINDOW_MS (real time, whatever the service's clock says)
  const burst = createBurstGauge({ windowMs: BUSY_WINDOW_MS, messages: BUSY_MESSAGES, monotonic: options.monotonic });
  /**
   * The verdicts' turn (services/derive-queue.ts, the scheduler of every derivation): one a read
   * asks for (`read`, never held back) before new mail's (`background`, taking turns by client,
   * at most MAX_RUNNING_PER_SENDER computing per client and per envelope domain, waiting while
   * ingest is in a burst); MAX_RUNNING at once in all.
   */
  const queue = createDeriveQueue({ slots: MAX_RUNNING, perOwner: MAX_RUNNING_PER_SENDER, lowSlots: MAX_RUNNING, maxWaitingPerOwner: Infinity, busy: burst.busy, busyRetryMs: BUSY_WINDOW_MS, onSettled: settle });

  /** Bytes held by waiting verdicts (given by ingest, not yet handed to the worker). */
  let heldBytes = 0;
  /**
   * Verdicts computed here and not yet committed (the store may commit them with a later write:
   * SQLite lazily), answered from here meanwhile. Bounded by the writes in flight; no cache
   * (services/answers.ts keeps the answers made of verdicts).
   */
  const unwritten = new Map<string, Authentication>();

  /** `given`: the envelope and, when still held, the bytes ingest stored (nothing read back then). */
  async function compute(key: string, given?: { envelope: MessageEnvelope; raw: Uint8Array | null }): Promise<void> {
    let envelope = given?.envelope;
    if (!envelope) {
      const kept = await store.getAuthentication(key);
      if (!kept || kept.verdicts || !kept.envelope) return; // gone, done already, or not over SMTP
      envelope = kept.envelope;
    }
    let raw = given?.raw ?? null;
    if (!raw) {
      const src = await store.readRaw(key);
      const whole = src && (await collect(src.chunks, src.sizeBytes));
      raw = whole && verdictsInput(whole);
    }
    if (!raw) return;
    const task: AuthTask = { envelope, dnsServers: options.dnsServers, authservId: options.authservId, budgetMs, queryTimeoutMs };
    const started = now();
    let verdict: Authentication;
    try {
      // ingest's bytes are copied to the worker (the caller may still hold them); read ones are handed over
      verdict = await pool.run<'view', Authentication>('view', raw, limits, { options: { view: AUTHENTICATION_VIEW.name, auth: task }, offThread: true, keepRaw: Boolean(given?.raw) });
    } catch (err) {
      if (closed) return;
      // the worker died or was stopped as stuck: kept as temperror, so no read asks for it again
      log.warn({ err, bytes: raw.byteLength }, 'authentication checks did not finish; kept as temperror');
      verdict = AUTHENTICATION_VIEW.fallback(task, 'the checks did not finish');
    }
    options.onComputed?.((now() - started) / 1000, verdict);
    // answered from memory at once: the store may commit them with a later write (SQLite: lazily),
    // which this verdict's slot does not wait for
    unwritten.set(key, verdict);
    writing++;
    store.putAuthentication(key, JSON.stringify(verdict))
      .catch((err) => log.warn({ err }, 'authentication verdicts could not be kept; a later read asks again'))
      .finally(() => {
        if (unwritten.get(key) === verdict) unwritten.delete(key);
      })
      .finally(() => {
        writing--;
        settle();
      });
  }

  /** The queue takes no new message (`accepting` is its negation). */
  const full = () => closed || known.size >= MAX_WAITING + MAX_RUNNING;
  /** Given bytes this long are kept until the worker takes them (`holds`). */
  const fits = (bytes: number) => bytes > 0 && heldBytes + bytes <= MAX_HELD_BYTES;
  const schedule = (key: string, given?: { envelope: MessageEnvelope; raw: Uint8Array | null }) => {
    if (known.has(key) || full()) return;
    known.add(key);
    // ingest gives a copy of its own; bytes that read as empty (handed on elsewhere) are read back
    let held = given?.raw && fits(given.raw.byteLength) ? given.raw : null;
    if (held) heldBytes += held.byteLength;
    const release = () => {
      if (held) heldBytes -= held.byteLength;
      held = null;
    };
    const run = async () => {
      const raw = held;
      try {
        await compute(key, given && { envelope: given.envelope, raw });
      } catch (err) {
        log.warn({ err }, 'authentication verdicts could not be computed; a later read asks again');
      } finally {
        release();
        known.delete(key);
      }
    };
    // a read's own (each message its own caller: never held back by another's), or new mail's by sender
    if (!given) return void queue.submit(`r:${key}`, 'read', run);
    const { clientIp, mailFrom, helo } = given.envelope;
    const domain = domainOf(mailFrom) ?? (helo.trim().toLowerCase().replace(/\.$/, '') || null);
    queue.submit(`c:${ipBucket(clientIp)}`, 'background', run, domain && `d:${domain}`);
  };

  return {
    scheduleMessage(messageKey, raw, envelope) {
      burst.arrived();
      schedule(messageKey, { envelope, raw });
    },
    async get(key, receivedAt) {
      const hit = unwritten.get(key);
      if (hit) return hit;
      const kept = await store.getAuthentication(key);
      if (!kept) return null;
      const v = parseVerdicts(kept.verdicts);
      if (!v && kept.envelope && now() - receivedAt > budgetMs + 1000) schedule(key);
      return v;
    },
    idle: () => (queue.running === 0 && writing === 0 && queue.waiting === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
    get waiting() {
      return queue.waiting;
    },
    get accepting() {
      return !full();
    },
    holds: fits,
    warm: () => pool.warm(),
    async close() {
      closed = true;
      queue.clear();
      settle();
      heldBytes = 0;
      await new Promise<void>((resolve) => (queue.running === 0 && writing === 0 ? resolve() : idleWaiters.push(resolve)));
      await ownLane?.close();
    },
  };
}
