// Derived views (docs/house-style.md "The message model"): everything beyond the summary row is derived
// from the stored raw message once, on first read, on the `derive` lane of the worker pool within a
// time budget, then kept in the store beside the message (services/answers.ts keeps the answers made of them).
// Which views there are, their budgets and fallbacks are the registry's (derive/registry.ts): this
// runs them by stage. A derivation that runs out of time gets its defined fallback (docs/decisions.md
// "Derived views"). Who gets the workers first is derive-queue.ts's: readers before lists before
// background work, callers in turn.
import type { Logger } from 'pino';
import { ipBuckets } from '../domain/limits.ts';
import type { MessageViews } from '../domain/message.ts';
import type { ParseLimits } from '../derive/mime.ts';
import { BudgetExceededError, createLane, LANE_WORKERS, type Kept, type Lane } from '../derive/pool.ts';
import { isCurrent, SEARCH_TEXT_VIEW, versionsOf, STORED_VIEWS, type ServiceContext, type ServiceView, type StoredView, type WorkerView } from '../derive/registry.ts';
import { registryLane } from '../derive/registry-lane.ts';
import type { SpamdTarget } from '../derive/spamd.ts';
import type { DerivedMessage } from '../derive/views.ts';
import type { MessageStore } from '../store/store.ts';
import { createDeriveQueue, type Priority } from './derive-queue.ts';

const EMPTY = new Uint8Array(0);

/** Time budget of one derivation: a base plus a share per MiB of message, capped. */
export const DERIVE_BUDGET = Object.freeze({ baseMs: 5000, perMiBMs: 1000, maxMs: 30_000 });

/** Who asks for views, and how urgently (derive-queue.ts). */
export interface Reader {
  /** The caller's bucket (an IP bucket or a key); work of one owner never holds every worker. */
  owner: string;
  /** `read`: one email opened; `list`: rows of a list (previews). */
  priority: Exclude<Priority, 'background'>;
}
/** The owner of search texts asked for without a reader: one at a time. */
const SEARCH_OWNER = '\u0000search';
/** The owner of views asked again (a spam score after spamd was down): one at a time. */
const ASK_AGAIN_OWNER = '\u0000ask-again';
/**
 * A `service` view kept as a temporary failure (ServiceView.askAgain) is asked again by a read at
 * least this long after it was made, then after twice as long each time, ASK_AGAIN_TIMES times at
 * most (1, 2, 4, 8 and 16 minutes: within an email's hour).
 */
export const ASK_AGAIN_MS = 60_000;
export const ASK_AGAIN_TIMES = 5;
/** A `service` view out of time this many times in a row is not asked by first reads for BREAKER_MS (serviceValue). */
export const BREAKER_FAILURES = 2;
export const BREAKER_MS = 60_000;
/** Messages whose asking again this process keeps track of (the oldest forgotten first). */
const ASK_AGAIN_KEYS = 10_000;
/**
 * The reader of a request from `ip`. Its owner is the client's network (an IPv4 address, an IPv6
 * /48: ipBuckets' widest), not its key or session: minting keys or sessions, or rotating addresses
 * inside a /48, adds no workers.
 */
export const readerOf = (ip: string, priority: Reader['priority'] = 'read'): Reader => ({ owner: ipBuckets(ip).at(-1)!, priority });
/** Reads without a caller (the service itself, tests). */
export const SERVICE_READER: Reader = { owner: '', priority: 'read' };

export const deriveBudgetMs = (bytes: number) =>
  Math.min(DERIVE_BUDGET.maxMs, DERIVE_BUDGET.baseMs + Math.ceil((bytes / (1024 * 1024)) * DERIVE_BUDGET.perMiBMs));

export interface ViewService {
  /** The views of a message; null when the message is gone. Derives them on first call, queued as `reader`'s. */
  get(messageKey: string, reader?: Reader): Promise<MessageViews | null>;
  /**
   * Whether views are final: no view in them is a temporary failure that a later read asks again
   * (services/answers.ts keeps only answers made of final views).
   */
  isFinal(views: MessageViews): boolean;
  /**
   * The search text of a message that has none yet (docs/decisions.md "Body search": made on the
   * first search that meets it, not at ingest): made on a derivation worker as `reader`'s work
   * (default: a list's, of one owner for all), kept, and given; null when the message is gone.
   * Searches of one message at once share one. Never derives its views.
   */
  searchText(messageKey: string, reader?: Reader): Promise<string | null>;
  /** Derivations waiting for a worker (a gauge). */
  readonly waiting: number;
  /** Resolves once views derived for this key are written to the store (parts readable). */
  stored(messageKey: string): Promise<void>;
  /** Starts a worker ahead of the first read (called once the service listens). */
  warm(): void;
  close(): Promise<void>;
}

/** Reads a stored byte stream whole (null when it is not `size` bytes: deleted or changed meanwhile). */
export async function collect(chunks: AsyncIterable<Uint8Array>, size: number): Promise<Uint8Array | null> {
  const out = new Uint8Array(new ArrayBuffer(size));
  let at = 0;
  for await (const c of chunks) {
    if (at + c.byteLength > size) return null;
    out.set(c, at);
    at += c.byteLength;
  }
  return at === size ? out : null;
}

/** A kept document, when it holds every view of the registry at its version. */
function parseViews(json: string | null, registry: readonly StoredView[]): MessageViews | null {
  if (!json) return null;
  try {
    const v = JSON.parse(json) as MessageViews;
    return v && typeof v === 'object' && isCurrent(v, registry) ? v : null;
  } catch {
    return null;
  }
}

export interface ViewServiceOptions {
  /** The `derive` lane of the service's pool (assemble.ts); absent: a lane of its own, closed with the service. */
  pool?: Lane;
  /** The views to derive (default: derive/registry.ts STORED_VIEWS; tests add their own). */
  registry?: readonly StoredView[];
  /** Observes each derivation: seconds taken and its outcome (metrics). */
  onDerived?: (seconds: number, outcome: string) => void;
  /** The budget of a message of this many bytes (default deriveBudgetMs; tests shorten it). */
  budgetMs?: (bytes: number) => number;
  /** The spamd that scores each message as its views are derived (derive/spamd.ts); null/absent: `spam` stays null. */
  spamd?: SpamdTarget | null;
  /** Budgets to use instead of the registry's, by view name (tests shorten them). */
  budgets?: ServiceContext['budgets'];
  /** The first wait before a temporary failure is asked again (default ASK_AGAIN_MS; tests shorten it). */
  askAgainMs?: number;
  /** How long a failing `service` view is not asked (default BREAKER_MS; tests shorten it). */
  breakerMs?: number;
  /** Told when this service changes a message's kept views (a view asked again): the answer cache drops what it kept of them. */
  onWritten?: (messageKey: string) => void;
}

/** Resolves with `p`, or with `late()` once `ms` pass first. */
function within<T>(p: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const out = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(late()), ms);
  });
  return Promise.race([p, out]).finally(() => clearTimeout(timer));
}

export function createViewService(store: MessageStore, limits: ParseLimits, log: Logger, options: ViewServiceOptions = {}): ViewService {
  // the `derive` lane: a long derivation never delays the summaries the 250 waits for
  const ownLane = options.pool ? null : createLane({ name: 'derive', workers: LANE_WORKERS.derive, warn: (msg, err) => log.warn({ err }, msg) });
  const registry = options.registry ?? STORED_VIEWS;
  const pool = registryLane(options.pool ?? ownLane!, registry); // its tasks derive `registry`'s views
  const context: ServiceContext = { spamd: options.spamd ?? null, budgets: options.budgets, warn: (fields, msg) => log.warn(fields, msg) };
  const budgetOf = (v: StoredView) => options.budgets?.[v.name] ?? v.budget ?? 0;
  // derivations at once: the lane's workers (apart from the summaries': a slow derivation never delays a 250)
  const slots = pool.max;
  const queue = createDeriveQueue({ slots });
  /** Derivations under way (waiting or running), one per message: later readers share it and may promote it. */
  const inflight = new Map<string, { promise: Promise<MessageViews | null>; promote(reader: Reader): void }>();
  /** Search texts being made (until kept), one per message: later searches share it (and may promote it). */
  const searching = new Map<string, { promise: Promise<string | null>; promote(owner: string, priority: Priority): void }>();
  let closed = false;
  /**
   * Views derived here whose write is not yet committed: a reader gets them at once (the store does
   * not hold them yet), parts wait for the write. Bounded by the derivations at once (the lane's workers) and
   * the writes they leave: this is no cache (services/answers.ts is the one).
   */
  const writing = new Map<string, { views: MessageViews; write: Promise<void> }>();
  /** Kept views changed (not their first write: a reader already had those very views). */
  const written = (key: string) => options.onWritten?.(key);

  /**
   * The `parse` views (and the inputs of `worker` views, kept on the worker that parsed when one
   * did: `held`): in full, then without HTML, then header-only, then without a parser.
   */
  async function derive(raw: Uint8Array): Promise<DerivedMessage & Partial<Kept>> {
    const budgetMs = (options.budgetMs ?? deriveBudgetMs)(raw.byteLength);
    try {
      return await pool.run('derive', raw, limits, { budgetMs, keepRaw: true, keep: true, options: { html: true } });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
    }
    log.warn({ bytes: raw.byteLength, budgetMs }, 'derivation ran out of time; deriving again without HTML');
    try {
      return await pool.run('derive', raw, limits, { budgetMs, keepRaw: true, keep: true, options: { html: false } });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
    }
    log.warn({ bytes: raw.byteLength, budgetMs }, 'derivation without HTML ran out of time; keeping the text as received');
    try {
      return await pool.run('fallback', raw, limits, { budgetMs, keepRaw: true });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
      // no parser at all: linear in the (capped) body (loaded here only: derive/views.ts brings the
      // HTML sanitizer, which the main thread loads on first use, not at start)
      return (await import('../derive/views.ts')).minimalViews(raw);
    }
  }

  /**
   * A `worker` view's task, on a worker within its own budget; its fallback when it runs out or
   * fails. Its input is kept on the worker that derived the message (`held`: the task goes there and
   * only the task crosses), or given here when the derivation ran on this thread.
   */
  async function runOnWorker(v: WorkerView, d: DerivedMessage & Partial<Kept>): Promise<unknown> {
    const input = d.inputs[v.name];
    const kept = d.held && d.kept?.[v.name];
    try {
      if (kept) return await pool.run('view', EMPTY, limits, { budgetMs: budgetOf(v), on: d.held, options: { view: v.name } });
      return await pool.run('view', new TextEncoder().encode(input), limits, { budgetMs: budgetOf(v), options: { view: v.name } });
    } catch (err) {
      const over = err instanceof BudgetExceededError;
      log.warn({ err: over ? undefined : err, view: v.name, chars: input?.length }, over ? 'a view ran out of time; it reads its fallback' : 'a view failed; it reads its fallback');
      const reason = over ? 'over_budget' : 'failed';
      return kept ? kept[reason] : v.fallback(reason, input);
    }
  }
  /**
   * The `worker` views, the shortest budget (the entry's) first: one past its budget ends the worker
   * that keeps the inputs, so those behind it lose theirs (they read `failed`); a long check goes last.
   */
  const workerViews = registry.filter((v): v is WorkerView => v.stage === 'worker').sort((a, b) => (a.budget ?? 0) - (b.budget ?? 0));

  /**
   * A `service` view that ran out of its budget BREAKER_FAILURES times in a row (spamd hung: it
   * accepts and never answers) is not asked by first reads for BREAKER_MS: they get its failure at
   * once, which a later read asks again (askAgain, which always asks and closes the breaker on a
   * value), instead of each waiting out the budget. A failure answered at once (spamd down, an
   * error reply) costs no wait and does not count.
   */
  const breakers = new Map<string, { timeouts: number; openUntil: number }>();
  const serviceValue = (v: ServiceView, raw: Uint8Array, asking: 'first' | 'again'): Promise<unknown> | null => {
    const b = breakers.get(v.name);
    if (asking === 'first' && b && b.timeouts >= BREAKER_FAILURES && performance.now() < b.openUntil) return Promise.resolve(v.fallback());
    const t0 = performance.now();
    const p = v.derive(raw, context, budgetOf(v));
    if (!p) return null;
    return within(p, budgetOf(v) + 1000, () => v.fallback()).then((value) => {
      const failed = v.askAgain !== undefined && v.askAgain(value as never);
      const seen = breakers.get(v.name) ?? { timeouts: 0, openUntil: 0 };
      if (!failed) seen.timeouts = 0;
      else if (performance.now() - t0 >= budgetOf(v) * 0.9) {
        seen.timeouts++;
        if (seen.timeouts >= BREAKER_FAILURES) {
          const ms = options.breakerMs ?? BREAKER_MS;
          seen.openUntil = performance.now() + ms;
          if (seen.timeouts === BREAKER_FAILURES) log.warn({ view: v.name, ms }, 'a view ran out of time repeatedly; first reads do not ask it for a while (they read its failure, asked again later)');
        }
      }
      breakers.set(v.name, seen);
      return value;
    });
  };

  /**
   * Derives the views of a message from its raw bytes (on a worker the queue gave) and returns what
   * finishes them: the `service` views (spamd), which only wait, are awaited after the queue's slot
   * is given back, so a hung spamd never holds a derivation slot.
   */
  async function deriveInSlot(key: string): Promise<{ finish: () => Promise<MessageViews> } | null> {
    // derivations have begun: the next one finds a worker started, not starting (one: the lane starts
    // another only for reads that wait, derive/pool.ts GROW_AFTER_MS, so short reads keep one thread)
    pool.warm(1);
    const src = await store.readRaw(key);
    if (!src) return null;
    const raw = await collect(src.chunks, src.sizeBytes);
    if (!raw) return null; // freed while it was read
    const started = performance.now();
    // `service` views (spamd reads the raw message) run while a worker parses it: the first read waits for the slower one
    const waiting: [StoredView, Promise<unknown>][] = [];
    for (const v of registry) {
      if (v.stage !== 'service') continue;
      const p = serviceValue(v, raw, 'first');
      if (p) waiting.push([v, p]);
    }
    const derived = await derive(raw);
    const { views, parts } = derived;
    options.onDerived?.((performance.now() - started) / 1000, views.outcome);
    const doc = views as unknown as Record<string, unknown>;
    // the versions of this service's registry (the worker stamps those of the one it loads)
    const versions = versionsOf(registry);
    if (versions) doc.versions = versions;
    else delete doc.versions;
    try {
      for (const v of workerViews) if (v.name in derived.inputs || derived.kept?.[v.name]) doc[v.name] = await runOnWorker(v, derived);
    } finally {
      if (derived.held) pool.release(derived.held); // (each view's task has released it already, unless one was skipped)
    }
    return {
      finish: async () => {
        for (const [v, p] of waiting) doc[v.name] = await p;
        // kept in the background: the reader does not wait for the commit (`writing` answers meanwhile)
        const write: Promise<void> = store.putViews(key, JSON.stringify(views), parts)
          .catch((err) => log.warn({ err }, 'derived views could not be kept; they will be derived again'))
          .finally(() => {
            if (writing.get(key)?.write === write) writing.delete(key);
          });
        writing.set(key, { views, write });
        return views;
      },
    };
  }

  /** The kept views, or a derivation queued as `first`'s (promoted when a more urgent reader joins). */
  function load(key: string, first: Reader) {
    let want = first;
    let promote: ((owner: string, priority: Priority) => void) | null = null;
    const promise = (async () => {
      const stored = parseViews(await store.getViews(key), registry);
      if (stored) return stored;
      const ticket = queue.enqueue(want.owner, want.priority, () => deriveInSlot(key));
      promote = ticket.promote;
      const done = await ticket.promise;
      return done && done.finish();
    })();
    return {
      promise,
      promote(reader: Reader) {
        if (promote) promote(reader.owner, reader.priority);
        else if (reader.priority === 'read' && want.priority !== 'read') want = reader;
      },
    };
  }

  /** The `service` views whose kept failures are asked again (the spam score). */
  const askable = registry.filter((v): v is ServiceView => v.stage === 'service' && v.askAgain !== undefined);
  const askAgainMs = options.askAgainMs ?? ASK_AGAIN_MS;
  /** Per message with a failure kept: when it may be asked again, and how often it was. */
  const asked = new Map<string, { at: number; times: number }>();
  const askingNow = new Set<string>();

  /** Called with the views a read got: a failure kept in them is asked again when it is due. */
  const askAgainIfDue = (key: string, views: MessageViews): void => {
    if (closed || askable.length === 0) return;
    const doc = views as unknown as Record<string, unknown>;
    let failed = false;
    for (const v of askable) if (v.askAgain!(doc[v.name] as never)) failed = true;
    if (!failed) return;
    const now = performance.now();
    const seen = asked.get(key);
    if (!seen) {
      if (asked.size >= ASK_AGAIN_KEYS) asked.delete(asked.keys().next().value!);
      asked.set(key, { at: now + askAgainMs, times: 0 });
      return;
    }
    if (now < seen.at || seen.times >= ASK_AGAIN_TIMES || askingNow.has(key)) return;
    seen.times++;
    seen.at = now + askAgainMs * 2 ** seen.times;
    askingNow.add(key);
    queue.enqueue(ASK_AGAIN_OWNER, 'background', () => askAgain(key, views)).promise
      .catch((err) => log.warn({ err }, 'a view could not be asked again; a later read asks again'))
      .finally(() => askingNow.delete(key));
  };

  /**
   * Asks the failed `service` views of a message again (in the background: the read that found them
   * has answered). A value that is no failure now replaces the kept one, in the store (the views
   * document is written again, with the message's parts as kept) and here.
   */
  async function askAgain(key: string, views: MessageViews): Promise<void> {
    const src = await store.readRaw(key);
    const raw = src && (await collect(src.chunks, src.sizeBytes));
    if (!raw) return; // gone meanwhile
    const doc = { ...(views as unknown as Record<string, unknown>) };
    let changed = false;
    for (const v of askable) {
      if (!v.askAgain!(doc[v.name] as never)) continue;
      const p = serviceValue(v, raw, 'again');
      const value = p && (await p);
      if (value === null || v.askAgain!(value as never)) continue; // still failing: a later read asks again
      doc[v.name] = value;
      changed = true;
      log.info({ view: v.name }, 'a view asked again has a value now');
    }
    if (!changed) return;
    // the parts as kept (putViews replaces the document and its parts together)
    const parts: Uint8Array[] = [];
    for (let i = 0; i < views.attachments.length; i++) {
      const part = await store.readPart(key, i);
      const bytes = part && (await collect(part.chunks, part.sizeBytes));
      if (!bytes) return; // gone meanwhile
      parts.push(bytes);
    }
    const next = doc as unknown as MessageViews;
    await store.putViews(key, JSON.stringify(next), parts);
    written(key);
  }

  /** A message's search text, made on a worker, and its write to the store (the text is given before the write settles). */
  async function makeSearchText(key: string): Promise<{ text: string; kept: Promise<void> } | null> {
    const src = await store.readRaw(key);
    const raw = src && (await collect(src.chunks, src.sizeBytes));
    if (!raw) return null; // gone meanwhile
    let text: string;
    try {
      text = (await pool.run('view', raw, limits, { budgetMs: (options.budgetMs ?? deriveBudgetMs)(raw.byteLength), keepRaw: true, options: { view: SEARCH_TEXT_VIEW.name } })) as string;
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
      log.warn({ bytes: raw.byteLength }, 'a search text ran out of time; the message is searched as having no body text');
      text = SEARCH_TEXT_VIEW.fallback();
    }
    const kept = store.putSearchText(key, text).catch((err) => log.warn({ err }, 'a search text could not be kept; a later search makes it again'));
    return { text, kept };
  }

  const isFinal = (views: MessageViews): boolean => {
    const doc = views as unknown as Record<string, unknown>;
    for (const v of askable) if (v.askAgain!(doc[v.name] as never)) return false;
    return true;
  };

  return {
    isFinal,
    async get(key, reader = SERVICE_READER) {
      const fresh = writing.get(key)?.views;
      if (fresh) {
        askAgainIfDue(key, fresh);
        return fresh;
      }
      let d = inflight.get(key);
      if (d) d.promote(reader);
      else {
        // one derivation per message at a time, however many readers ask
        const started = load(key, reader);
        d = started;
        inflight.set(key, started);
        started.promise.then(() => inflight.delete(key), () => inflight.delete(key));
      }
      const views = await d.promise;
      if (views) askAgainIfDue(key, views);
      return views;
    },
    searchText(key, reader) {
      const owner = reader?.owner || SEARCH_OWNER;
      const priority = reader?.priority ?? 'list';
      const shared = searching.get(key);
      if (shared) {
        shared.promote(owner, priority);
        return shared.promise;
      }
      const ticket = queue.enqueue(owner, priority, () => makeSearchText(key));
      const entry = { promise: ticket.promise.then((made) => made && made.text), promote: ticket.promote };
      searching.set(key, entry);
      // forgotten once kept: a search after that reads it from the store
      const forget = () => void searching.delete(key);
      ticket.promise.then((made) => made?.kept).then(forget, forget);
      return entry.promise;
    },
    get waiting() {
      return queue.waiting;
    },
    stored: (key) => writing.get(key)?.write ?? Promise.resolve(),
    warm: () => pool.warm(),
    async close() {
      closed = true;
      queue.drain(); // what waits runs now (on this thread once the pool is closed)
      await Promise.all([...writing.values()].map((w) => w.write));
      await ownLane?.close();
    },
  };
}
