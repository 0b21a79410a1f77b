// Derived views (ARCHITECTURE.md "The message model"): everything beyond the summary row is derived
// from the stored raw message once, on first read, in a worker thread within a time budget, then
// kept in the store beside the message (and in a small byte-bounded cache here). A derivation that
// runs out of time gets its defined fallback (docs/decisions.md "Derived views").
import type { Logger } from 'pino';
import type { MessageViews } from '../domain/message.ts';
import { BudgetExceededError, createParsePool, type ParsePool } from '../smtp/parse-pool.ts';
import { minimalViews, VIEWS_VERSION, type DerivedMessage, type ParseLimits } from '../smtp/parse.ts';
import type { Store } from '../store/store.ts';

/** Time budget of one derivation: a base plus a share per MiB of message, capped. */
export const DERIVE_BUDGET = Object.freeze({ baseMs: 5000, perMiBMs: 1000, maxMs: 30_000 });
/** Cache of views by message key, bounded by the characters it holds. */
const CACHE_MAX_CHARS = 16 * 1024 * 1024;
const CACHE_MAX_ENTRY_CHARS = 2 * 1024 * 1024;

export const deriveBudgetMs = (bytes: number) =>
  Math.min(DERIVE_BUDGET.maxMs, DERIVE_BUDGET.baseMs + Math.ceil((bytes / (1024 * 1024)) * DERIVE_BUDGET.perMiBMs));

export interface ViewService {
  /** The views of a message; null when the message is gone. Derives them on first call. */
  get(messageKey: string): Promise<MessageViews | null>;
  /** Resolves once views derived for this key are written to the store (parts readable). */
  stored(messageKey: string): Promise<void>;
  /** Starts a worker ahead of the first read (called once the service listens). */
  warm(): void;
  close(): Promise<void>;
}

/** Reads a stored byte stream whole. */
async function collect(chunks: AsyncIterable<Uint8Array>, size: number): Promise<Uint8Array | null> {
  const out = new Uint8Array(new ArrayBuffer(size));
  let at = 0;
  for await (const c of chunks) {
    if (at + c.byteLength > size) return null;
    out.set(c, at);
    at += c.byteLength;
  }
  return at === size ? out : null;
}

function parseViews(json: string | null): MessageViews | null {
  if (!json) return null;
  try {
    const v = JSON.parse(json) as MessageViews;
    return v.version === VIEWS_VERSION ? v : null;
  } catch {
    return null;
  }
}

export interface ViewServiceOptions {
  pool?: ParsePool;
  /** Observes each derivation: seconds taken and its outcome (metrics). */
  onDerived?: (seconds: number, outcome: string) => void;
  /** The budget of a message of this many bytes (default deriveBudgetMs; tests shorten it). */
  budgetMs?: (bytes: number) => number;
}

export function createViewService(store: Store, limits: ParseLimits, log: Logger, options: ViewServiceOptions = {}): ViewService {
  // its own workers: a long derivation never delays the summaries the 250 waits for
  const pool = options.pool ?? createParsePool({ workers: 2, warn: (msg, err) => log.warn({ err }, msg) });
  const inflight = new Map<string, Promise<MessageViews | null>>();
  /** Writes of derived views not yet committed: readers get the views at once, parts wait for these. */
  const writing = new Map<string, Promise<void>>();
  let cache = new Map<string, { views: MessageViews; chars: number }>();
  let cachedChars = 0;

  const remember = (key: string, views: MessageViews) => {
    const chars = (views.textBody?.length ?? 0) + (views.htmlBody?.length ?? 0) + views.agentBody.body.length + 2048;
    if (chars > CACHE_MAX_ENTRY_CHARS) return;
    if (cachedChars + chars > CACHE_MAX_CHARS) {
      cache = new Map();
      cachedChars = 0;
    }
    cache.set(key, { views, chars });
    cachedChars += chars;
  };

  async function derive(raw: Uint8Array): Promise<DerivedMessage> {
    const budgetMs = (options.budgetMs ?? deriveBudgetMs)(raw.byteLength);
    try {
      return await pool.run('derive', raw, limits, { budgetMs, keepRaw: true });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
    }
    log.warn({ bytes: raw.byteLength, budgetMs }, 'derivation ran out of time; deriving again without HTML');
    try {
      return await pool.run('derive', raw, limits, { budgetMs, keepRaw: true, options: { html: false } });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
    }
    log.warn({ bytes: raw.byteLength, budgetMs }, 'derivation without HTML ran out of time; keeping the text as received');
    try {
      return await pool.run('fallback', raw, limits, { budgetMs, keepRaw: true });
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err;
      return minimalViews(raw); // no parser at all: linear in the (capped) body
    }
  }

  async function load(key: string): Promise<MessageViews | null> {
    const stored = parseViews(await store.getViews(key));
    if (stored) return stored;
    const src = await store.readRaw(key);
    if (!src) return null;
    const raw = await collect(src.chunks, src.sizeBytes);
    if (!raw) return null; // freed while it was read
    const started = performance.now();
    const { views, parts } = await derive(raw);
    options.onDerived?.((performance.now() - started) / 1000, views.outcome);
    // kept in the background: the reader does not wait for the commit (the cache answers meanwhile)
    const write = store.putViews(key, JSON.stringify(views), parts)
      .catch((err) => log.warn({ err }, 'derived views could not be kept; they will be derived again'))
      .finally(() => {
        if (writing.get(key) === write) writing.delete(key);
      });
    writing.set(key, write);
    remember(key, views);
    return views;
  }

  return {
    async get(key) {
      const hit = cache.get(key);
      if (hit) return hit.views;
      let p = inflight.get(key);
      if (!p) {
        // one derivation per message at a time, however many readers ask
        p = load(key).finally(() => inflight.delete(key));
        inflight.set(key, p);
      }
      const views = await p;
      if (views) remember(key, views);
      return views;
    },
    stored: (key) => writing.get(key) ?? Promise.resolve(),
    warm: () => pool.warm(),
    async close() {
      await Promise.all([...writing.values()]);
      await pool.close();
    },
  };
}
