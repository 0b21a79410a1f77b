// Authentication verdicts (SPF, DKIM, DMARC, ARC): a derived view of a stored message, computed once
// with mailauth on a worker thread of its own (derive/authenticate.ts), within a time budget, kept in
// the store beside the message and never computed again. Ingest schedules it right after the 250
// (in the background: the 250 never waits for it); a read of a message that has none yet schedules
// it too (another node stored it, or this one restarted) and answers `null` meanwhile.
// docs/authentication.md has the design.
import type { Logger } from 'pino';
import type { Authentication, AuthTask } from '../derive/authenticate.ts';
import type { ParseLimits } from '../derive/mime.ts';
import { createLane, type Lane } from '../derive/pool.ts';
import { AUTH_BUDGET, AUTHENTICATION_VIEW } from '../derive/registry.ts';
import type { Store } from '../store/store.ts';
import { collect } from './views.ts';

export type { Authentication } from '../derive/authenticate.ts';

/** Verdicts computed at once (they mostly wait on DNS), and waiting; more are dropped (a read asks again). */
const MAX_RUNNING = 16;
const MAX_WAITING = 1000;

export interface AuthenticationService {
  /** Computes the verdicts of this email's message in the background (after ingest). */
  scheduleEmail(emailId: string): void;
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


export function createAuthenticationService(store: Store, limits: ParseLimits, log: Logger, options: AuthenticationOptions): AuthenticationService {
  // one worker: verdicts wait on DNS far more than they compute, so one thread runs many at once
  const ownLane = options.pool ? null : createLane({ name: 'verdicts', workers: 1, preload: 'authenticate', background: true, warn: (msg, err) => log.warn({ err }, msg) });
  const pool = options.pool ?? ownLane!;
  const budgetMs = options.budgetMs ?? AUTH_BUDGET.totalMs;
  const queryTimeoutMs = Math.min(options.queryTimeoutMs ?? AUTH_BUDGET.queryMs, budgetMs);
  const now = options.now ?? Date.now;
  /** Keys queued or computing (a message is computed once at a time). */
  const known = new Set<string>();
  const queue: (() => Promise<void>)[] = [];
  let running = 0;
  let closed = false;
  let idleWaiters: (() => void)[] = [];

  const pump = () => {
    while (running < MAX_RUNNING && queue.length) {
      const job = queue.shift()!;
      running++;
      void job().finally(() => {
        running--;
        pump();
      });
    }
    if (running === 0 && queue.length === 0) {
      const w = idleWaiters;
      idleWaiters = [];
      for (const f of w) f();
    }
  };

  async function compute(key: string): Promise<void> {
    const kept = await store.getAuthentication(key);
    if (!kept || kept.verdicts || !kept.envelope) return; // gone, done already, or not over SMTP
    const src = await store.readRaw(key);
    const raw = src && (await collect(src.chunks, src.sizeBytes));
    if (!raw) return;
    const task: AuthTask = { envelope: kept.envelope, dnsServers: options.dnsServers, authservId: options.authservId, budgetMs, queryTimeoutMs };
    const started = now();
    let verdict: Authentication;
    try {
      verdict = await pool.run<'view', Authentication>('view', raw, limits, { options: { view: AUTHENTICATION_VIEW.name, auth: task }, offThread: true });
    } catch (err) {
      if (closed) return;
      // the worker died or was stopped as stuck: kept as temperror, so no read asks for it again
      log.warn({ err, bytes: raw.byteLength }, 'authentication checks did not finish; kept as temperror');
      verdict = AUTHENTICATION_VIEW.fallback(task, 'the checks did not finish');
    }
    options.onComputed?.((now() - started) / 1000, verdict);
    await store.putAuthentication(key, JSON.stringify(verdict));
  }

  const schedule = (key: string, find?: () => Promise<string | null>) => {
    if (closed || known.has(key) || known.size >= MAX_WAITING + MAX_RUNNING) return;
    known.add(key);
    queue.push(async () => {
      try {
        const messageKey = find ? await find() : key;
        if (messageKey) await compute(messageKey);
      } catch (err) {
        log.warn({ err }, 'authentication verdicts could not be computed; a later read asks again');
      } finally {
        known.delete(key);
      }
    });
    pump();
  };

  return {
    scheduleEmail(emailId) {
      // by the email's id: its message key is the store's; the verdict is kept under the message
      schedule(`id:${emailId}`, async () => (await store.getEmail(emailId, now()))?.messageKey ?? null);
    },
    async get(key, receivedAt) {
      const kept = await store.getAuthentication(key);
      if (!kept) return null;
      const v = parseVerdicts(kept.verdicts);
      if (!v && kept.envelope && now() - receivedAt > budgetMs + 1000) schedule(key);
      return v;
    },
    idle: () => (running === 0 && queue.length === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
    get waiting() {
      return queue.length;
    },
    warm: () => pool.warm(),
    async close() {
      closed = true;
      queue.length = 0;
      await new Promise<void>((resolve) => (running === 0 ? resolve() : idleWaiters.push(resolve)));
      await ownLane?.close();
    },
  };
}
