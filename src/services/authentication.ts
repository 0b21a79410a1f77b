// Authentication verdicts (SPF, DKIM, DMARC, ARC): a derived view of a stored message, computed once
// with mailauth on a worker thread of its own (derive/authenticate.ts), within a time budget, kept in
// the store beside the message and never computed again. Ingest hands over the bytes it holds right
// after the 250 (in the background: the 250 never waits for it; nothing is read back from the store);
// the worker runs at a lower CPU priority, so under load ingest comes first and the verdicts take
// what is left. A read of a message that has none yet schedules it too (another node stored it,
// this one restarted, or the queue was full) and answers `null` meanwhile.
// docs/authentication.md has the design.
import type { Logger } from 'pino';
import { domainOf, temperrorVerdict } from '../domain/authentication.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Authentication, AuthTask } from '../derive/authenticate.ts';
import type { ParseLimits } from '../derive/mime.ts';
import { createLane, type Lane } from '../derive/pool.ts';
import { verdictsInput } from '../derive/authentication-view.ts';
import { AUTH_BUDGET, AUTHENTICATION_VIEW } from '../derive/registry.ts';
import type { MailStore, MessageEnvelope } from '../store/store.ts';
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
  const ownLane = options.pool ? null : createLane({ name: 'verdicts', workers: 1, preload: 'authenticate', background: true, warn: (msg, err) => log.warn({ err }, msg) });
  const pool = options.pool ?? ownLane!;
  const budgetMs = options.budgetMs ?? AUTH_BUDGET.totalMs;
  const queryTimeoutMs = Math.min(options.queryTimeoutMs ?? AUTH_BUDGET.queryMs, budgetMs);
  const now = options.now ?? Date.now;
  /** Keys queued or computing (a message is computed once at a time). */
  const known = new Set<string>();
  /** Verdicts of new mail (wait while ingest is busy), and verdicts a read asked for (never wait). */
  const queue: { run: () => Promise<void>; client: string; domain: string | null }[] = [];
  const asked: (() => Promise<void>)[] = [];
  let running = 0;
  /** New mail's verdicts computing, by client (`c:` + ipBucket) and by envelope domain (`d:` + domain). */
  const runningBy = new Map<string, number>();
  const share = (key: string | null) => (key ? (runningBy.get(key) ?? 0) : 0);
  const count = (key: string | null, by: number) => {
    if (!key) return;
    const n = share(key) + by;
    if (n > 0) runningBy.set(key, n);
    else runningBy.delete(key);
  };
  /** Verdicts computed and not yet written. */
  let writing = 0;
  let closed = false;
  let idleWaiters: (() => void)[] = [];

  // messages stored per window of BUSY_WINDOW_MS (real time, whatever the service's clock says)
  const monotonic = options.monotonic ?? (() => performance.now());
  let windowAt = 0;
  let inWindow = 0;
  let inPrevious = 0;
  const arrived = () => {
    const t = monotonic();
    if (t - windowAt >= BUSY_WINDOW_MS) {
      inPrevious = t - windowAt >= 2 * BUSY_WINDOW_MS ? 0 : inWindow;
      inWindow = 0;
      windowAt = t;
    }
    inWindow++;
  };
  const busy = () => {
    const t = monotonic();
    if (t - windowAt >= 2 * BUSY_WINDOW_MS) return false;
    if (t - windowAt >= BUSY_WINDOW_MS) return inWindow > BUSY_MESSAGES;
    return inWindow > BUSY_MESSAGES || inPrevious > BUSY_MESSAGES;
  };
  let wake: ReturnType<typeof setTimeout> | null = null;

  const pump = () => {
    while (running < MAX_RUNNING && (asked.length || queue.length)) {
      if (!asked.length && busy()) {
        // ingest is busy: new mail's verdicts wait for a quieter moment (looked at again then)
        wake ??= setTimeout(() => {
          wake = null;
          pump();
        }, BUSY_WINDOW_MS);
        break;
      }
      let job: () => Promise<void>;
      let done = () => {};
      if (asked.length) job = asked.shift()!;
      else {
        // the oldest verdict whose sender (client and domain) has less than its share computing
        const i = queue.findIndex((q) => share(q.client) < MAX_RUNNING_PER_SENDER && share(q.domain) < MAX_RUNNING_PER_SENDER);
        if (i < 0) break; // every waiting sender has its share computing: looked at again as one ends
        const [q] = queue.splice(i, 1);
        count(q.client, 1);
        count(q.domain, 1);
        job = q.run;
        done = () => {
          count(q.client, -1);
          count(q.domain, -1);
        };
      }
      running++;
      void job().finally(() => {
        done();
        running--;
        pump();
      });
    }
    if (running === 0 && writing === 0 && queue.length === 0 && asked.length === 0) {
      const w = idleWaiters;
      idleWaiters = [];
      for (const f of w) f();
    }
  };

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
        pump();
      });
  }

  const schedule = (key: string, given?: { envelope: MessageEnvelope; raw: Uint8Array | null }) => {
    if (closed || known.has(key) || known.size >= MAX_WAITING + MAX_RUNNING) return;
    known.add(key);
    // bytes handed on meanwhile (a large message goes to the store's writer thread) read as empty
    let held = given?.raw && given.raw.byteLength > 0 && heldBytes + given.raw.byteLength <= MAX_HELD_BYTES ? given.raw : null;
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
    if (!given) asked.push(run);
    else {
      const { clientIp, mailFrom, helo } = given.envelope;
      const domain = domainOf(mailFrom) ?? (helo.trim().toLowerCase().replace(/\.$/, '') || null);
      queue.push({ run, client: `c:${ipBucket(clientIp)}`, domain: domain && `d:${domain}` });
    }
    pump();
  };

  return {
    scheduleMessage(messageKey, raw, envelope) {
      arrived();
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
    idle: () => (running === 0 && writing === 0 && queue.length === 0 && asked.length === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
    get waiting() {
      return queue.length + asked.length;
    },
    warm: () => pool.warm(),
    async close() {
      closed = true;
      queue.length = 0;
      asked.length = 0;
      if (wake) clearTimeout(wake);
      wake = null;
      heldBytes = 0;
      await new Promise<void>((resolve) => (running === 0 && writing === 0 ? resolve() : idleWaiters.push(resolve)));
      await ownLane?.close();
    },
  };
}
