// The one "tell me about new mail" path: every edge that waits for mail at an address is told here.
// withWaitSlot takes the caller's concurrent-wait slot; the registry holds one bus subscription per
// address however many listen on it, and tells each listener in the same turn of the event loop:
//   - hold(): the long-poll (HTTP `wait` and `latest`, MCP `check_inbox`, IMAP IDLE) subscribes
//     first, then queries, and holds until the delivery event, the deadline, the client's
//     disconnect or shutdown;
//   - watch(): a standing listener, the event stream's (services/stream.ts follows an inbox on it).
// Time and timers are injected.
//
// The waits of one address that re-query after the same delivery with the same `key` share one
// query (the first starts it, the others take its result while it runs): with five waits per
// address that is one store read per address instead of five, and one listener call per delivery
// instead of five.
import type { Bus } from '../bus/bus.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { AppError } from '../domain/errors.ts';
import type { Limiter } from '../limiter/limiter.ts';

/** Timers, injected with the clock (tests drive both with fake timers). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}
const systemTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** A caller's concurrent-wait slots: which bucket, how many at once. */
export interface WaitSlots {
  bucket: string;
  max: number;
  /** The refusal in the edge's own words (default: a neutral one). */
  refusal?: string;
}

/** Lease of a slot beyond the hold itself: a node that dies with the slot frees it this much later. */
export const SLOT_MARGIN_MS = 15_000;

/**
 * Holds one of the caller's concurrent-wait slots while `run` runs (a long-poll, a check_inbox wait, an
 * event stream): refused with too_many_waiters when all are taken, released when `run` settles. The
 * lease outlives the hold by SLOT_MARGIN_MS. Every edge takes its slots here.
 */
export async function withWaitSlot<T>(limiter: Limiter, clock: Clock, slots: WaitSlots, holdMs: number, run: (release: () => Promise<void>) => Promise<T>, options: { keepAfterRun?: boolean } = {}): Promise<T> {
  const release = await limiter.acquireWait(slots.bucket, slots.max, holdMs + SLOT_MARGIN_MS, clock.now());
  if (!release) throw new AppError('too_many_waiters', slots.refusal ?? `This caller already holds ${slots.max} waiting requests or streams; let one finish first`, { retryAfter: 1 });
  let released = false;
  const once = async () => {
    if (released) return;
    released = true;
    await release();
  };
  try {
    return await run(once);
  } finally {
    if (!options.keepAfterRun) await once();
  }
}

export interface WaitRegistry {
  /** Resolves every held wait now (shutdown answers them with their empty result). */
  releaseAll(): void;
  readonly held: number;
  /**
   * Runs `query` until it returns a non-empty result or `ms` elapse. `query` runs once at once;
   * again after each delivery event for `address`. Returns the last result and whether it held.
   * Waits on the same address that pass the same `key` promise that their queries are the same
   * (same store read): after a delivery, one runs it and the others get a copy of its result.
   */
  hold<T extends unknown[]>(address: string, ms: number, query: () => Promise<T>, signal?: AbortSignal, key?: string): Promise<{ result: T; waited: boolean }>;
  /**
   * Calls `onDelivery` after each delivery event for `address` (lowercase), through the address's
   * one subscription, until the returned function is called (idempotent). Listening starts before
   * watch returns: a read made after it misses no delivery.
   */
  watch(address: string, onDelivery: () => void): () => void;
}

interface Waiter {
  /** A delivery arrived since this wait last queried. */
  pending: boolean;
  wake: (() => void) | null;
}

interface Group {
  /** Told of each delivery: the held waits' and the watchers'. */
  listeners: Set<() => void>;
  unsubscribe: () => void;
  /** Re-queries running now, by key: taken by the group's other waits instead of their own. */
  running: Map<string, Promise<unknown[]>>;
}

/** Requests one node holds at once, HTTP `wait` and `check_inbox` together (EPHEMAIL_MAX_HELD_WAITS). */
export const DEFAULT_MAX_HELD = 10_000;

export function createWaitRegistry(bus: Bus, options: { maxHeld?: number; clock?: Clock; timers?: Timers } = {}): WaitRegistry {
  const maxHeld = options.maxHeld ?? DEFAULT_MAX_HELD;
  const clock = options.clock ?? systemClock;
  const timers = options.timers ?? systemTimers;
  const groups = new Map<string, Group>();
  const releasers = new Set<() => void>();
  let closing = false;

  const join = (address: string, listener: () => void): Group => {
    let g = groups.get(address);
    if (!g) {
      const group: Group = { listeners: new Set(), unsubscribe: () => undefined, running: new Map() };
      groups.set(address, (g = group));
      group.unsubscribe = bus.subscribe(address, () => {
        for (const tell of group.listeners) tell();
      });
    }
    g.listeners.add(listener);
    return g;
  };
  const leave = (address: string, g: Group, listener: () => void) => {
    g.listeners.delete(listener);
    if (g.listeners.size > 0) return;
    g.unsubscribe();
    if (groups.get(address) === g) groups.delete(address);
  };
  /** The group's running query for `key`, or this one started and offered to the others. */
  const shared = <T extends unknown[]>(g: Group, key: string | undefined, query: () => Promise<T>): Promise<T> => {
    if (key === undefined) return query();
    const running = g.running.get(key) as Promise<T> | undefined;
    if (running) return running.then((r) => r.slice() as T); // each wait gets an array of its own
    const p = query();
    g.running.set(key, p);
    // offered until it settles: a wait that queries later starts a new read
    const done = () => {
      if (g.running.get(key) === p) g.running.delete(key);
    };
    p.then(done, done);
    return p;
  };

  return {
    get held() {
      return releasers.size;
    },
    releaseAll() {
      closing = true;
      for (const r of [...releasers]) r();
    },
    async hold(address, ms, query, signal, key) {
      if (ms <= 0 || closing || signal?.aborted) return { result: await query(), waited: false };
      const w: Waiter = { pending: false, wake: null };
      const tell = () => {
        w.pending = true;
        w.wake?.();
      };
      const g = join(address, tell);
      try {
        let result = await query();
        if (result.length > 0) return { result, waited: false };
        if (releasers.size >= maxHeld) {
          // one node holds at most this many, whoever asks: keys and sessions cannot add up past it
          throw new AppError('too_many_waiters', `The service already holds its maximum of ${maxHeld} waiting requests; retry shortly, or read without waiting`, { retryAfter: 1 });
        }
        const deadline = clock.now() + ms;
        let done = false;
        const finish = () => {
          done = true;
          w.wake?.();
        };
        const timer = timers.setTimeout(finish, ms);
        signal?.addEventListener('abort', finish, { once: true });
        releasers.add(finish);
        try {
          while (!done && !closing && clock.now() < deadline) {
            if (!w.pending) await new Promise<void>((resolve) => (w.wake = resolve));
            w.wake = null;
            if (done || closing) break;
            w.pending = false;
            result = await shared(g, key, query);
            if (result.length > 0) break;
          }
        } finally {
          timers.clearTimeout(timer);
          signal?.removeEventListener('abort', finish);
          releasers.delete(finish);
        }
        return { result, waited: true };
      } finally {
        leave(address, g, tell);
      }
    },
    watch(address, onDelivery) {
      // a listener of its own: the same function watched twice is two watches
      const listener = () => onDelivery();
      const g = join(address, listener);
      let watching = true;
      return () => {
        if (!watching) return;
        watching = false;
        leave(address, g, listener);
      };
    },
  };
}
