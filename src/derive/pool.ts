// Derivations off the main thread (docs/house-style.md rule 13): ONE pool of worker_threads, created in
// assemble.ts, in lanes that never share a worker: `summary` (the summaries the SMTP 250 waits for),
// `derive` (views on first read, the HTML check, search texts of older mail) and `verdicts` (the
// authentication checks, which mostly wait on DNS). A slow derivation holds only its own lane's
// workers, so no 250 is ever delayed by one. Within a lane: a worker that dies fails only the tasks
// it held (an ingest gets a temporary 451, so the sender retries: nothing acknowledged is lost); a
// task with a budget that runs past it ends its worker (the caller falls back); a lane whose workers
// cannot start at all works on the main thread instead.
// A lane dispatches; it does not decide whose work runs first. That is the one scheduler's
// (services/derive-queue.ts), which lets at most a lane's `max` derivations onto it at once (the
// verdicts: as many as one worker runs at once); a task waits here only for a worker to be up (or,
// with a budget, free). The summaries the 250 waits for are not scheduled: their lane is theirs.
// A derivation run with `keep` leaves its `worker` views' inputs on its worker (worker.ts): its
// answer carries a `Held`, and each view's task run `on` it goes to that worker, which is reserved
// for them meanwhile (no other budgeted task is sent there) so they do not wait behind another
// derivation. Each still runs alone within its own budget: one past it ends the worker as any task
// does, and the views not yet run then read their `failed` value (docs/decisions.md "The HTML check
// on the worker that holds the HTML").
//
// Workers run worker.ts: beside this file when run from source (through tsx, which a worker does not
// inherit from a loader registered at run time, so it is passed in execArgv), or the bundle's own
// worker entry, whose file name scripts/build.mjs defines as EPHEMAIL_WORKER_ENTRY.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { ParseLimits } from './mime.ts';
import { runOp, type KeptDerivation, type Op, type OpOptions } from './ops.ts';
import type { MessageSummary } from './summary.ts';
import type { DerivedMessage } from './views.ts';
import type { Reply, Task } from './worker.ts';
import { workerEntry } from '../worker-entry.ts';

/** What each task gives: `view` gives the view's value (the HTML check's, or the verdicts). */
type OpResult<O extends Op> = O extends 'summarize' ? MessageSummary : O extends 'view' ? unknown : DerivedMessage & Partial<Kept>;

/** The `worker` views' inputs a derivation left on its worker (run with `keep`), for their tasks run `on` it. */
export interface Held {
  /** The views whose inputs are kept there, not yet run. */
  readonly pending: ReadonlySet<string>;
}
/** What a derivation run with `keep` on a worker answers besides its views (absent when it ran on this thread). */
export interface Kept {
  /** Where its views' inputs are: run each view's task `on` it, then `release` it. */
  held: Held;
  /** By view name: what the view reads should its task give no value (over its budget, or its input lost). */
  kept: NonNullable<KeptDerivation['kept']>;
}

/** A view's task run `on` a derivation whose worker is gone (ended by another task's budget, or died). */
export class HeldLostError extends Error {}

declare const EPHEMAIL_WORKER_ENTRY: string | undefined;

const EMPTY = new Uint8Array(0);

/** A task that ran past its budget; its worker was ended. */
export class BudgetExceededError extends Error {}

/** One lane of the pool: workers of its own, so no task of another lane ever waits behind its tasks. */
export interface Lane {
  /**
   * Runs one task on a raw message. `raw` is transferred to the worker unless `keepRaw` (then
   * it is copied). With `budgetMs`, the task runs alone on a worker and rejects with
   * BudgetExceededError when it takes longer (the worker is replaced). With `offThread`, it waits for
   * a worker instead of running on this thread until one is up (and shares it with other tasks).
   */
  run<O extends Op, T = OpResult<O>>(op: O, raw: Uint8Array, limits: ParseLimits, opts?: RunOptions): Promise<T>;
  /**
   * Lets the worker `held` names take other tasks again (once its views ran, or were given up): a
   * caller that ran every view `on` it needs none (the last one releases it).
   */
  release(held: Held): void;
  /**
   * Starts workers now instead of on the first task, up to `count` (default 1) and the pool's most
   * (idempotent): a task that needs one then finds it ready instead of waiting for it to start.
   */
  warm(count?: number): void;
  /** Stops the workers; later parses run on the main thread. */
  close(): Promise<void>;
  /** Workers running now (0 before the first parse, or when parsing on the main thread). */
  readonly size: number;
  /** The most workers it runs (LANE_WORKERS, or what its creator said): what a scheduler lets run on it at once. */
  readonly max: number;
}

export interface RunOptions {
  options?: OpOptions;
  budgetMs?: number;
  keepRaw?: boolean;
  offThread?: boolean;
  /** A derivation: keep its `worker` views' inputs on its worker (the answer's `held`, `kept`). */
  keep?: boolean;
  /** A `view` task (`options.view`) on the input kept by this derivation, on its worker; HeldLostError when that worker is gone. */
  on?: Held;
  /** (the lane's own: when a task waiting for a worker was first queued) */
  queuedAt?: number;
}

/** A parse taking longer than this means the worker is stuck (a 30 MiB message parses in seconds). */
const STUCK_MS = 60_000;
/**
 * A lane's workers stop once none has held a task for this long (the next task starts one again):
 * an idle service keeps no derivation threads (docs/architecture.md "Memory"). A start costs ~50-100 ms
 * of CPU, so a service read every few seconds keeps its workers; one quiet for 10 s gives them back.
 */
export const IDLE_STOP_MS = 10_000;
/**
 * A lane that has a worker starts another for a budgeted task (a read's derivation) only once every
 * worker has been on its task this long, or a task has waited this long for one: a burst of short reads
 * (a few ms each) is served by the workers there are, and only slow work (a heavy HTML check, a
 * search over big mail) adds a thread, ~20-40 MB of RSS each (docs/architecture.md "Memory").
 */
export const GROW_AFTER_MS = 100;
/**
 * V8's young generation of a worker, at most (MB): left alone it grows to 128 MB per thread under
 * load and is never given back; capped, a burst costs a few more scavenges (docs/architecture.md
 * "Memory"). The main thread's is capped by `--max-semi-space-size` (package.json `start`).
 */
export const WORKER_YOUNG_MB = 12;
/**
 * V8's old generation of a worker, at most (MB): a worker that would need more ends (V8's "out of
 * memory" for that thread only) and its task fails as over its budget, so a derivation falls back
 * as it does when it runs out of time (without HTML, then header-only). Bounded, a worker's heap
 * is also collected sooner: 80 reads of emails with 1.9 MB of headers each kept ~140 MB more
 * without it (measured with a spawned service: docs/decisions.md "A memory budget kept by construction").
 */
export const WORKER_OLD_MB = 96;

export interface LaneOptions {
  /**
   * Most workers; default: one per core, at most 4. One starts with the first message; another
   * whenever every running one already holds two messages (HTML-heavy mail keeps a core busy each);
   * for budgeted tasks, once every running one has been busy for GROW_AFTER_MS.
   */
  workers?: number;
  /** Warnings (a worker died, the pool fell back to the main thread). */
  warn?: (msg: string, err?: unknown) => void;
  /** What a worker loads before it is ready: the parser (default), or the authentication checks. */
  preload?: 'parse' | 'authenticate';
  /** The lane's name, in warnings. */
  name?: string;
  /** Stop the workers once idle this long (default IDLE_STOP_MS). */
  idleStopMs?: number;
  /** A worker's old generation at most, MB (default WORKER_OLD_MB; tests lower it). */
  oldGenerationMb?: number;
  /**
   * Workers run at a lower CPU priority (nice 10, a thread's own on Linux) once loaded, for work on no
   * client's path: under load the rest of the process comes first (docs/decisions.md).
   */
  background?: boolean;
}

export function createLane(options: LaneOptions = {}): Lane {
  const max = Math.max(1, options.workers ?? Math.min(4, availableParallelism()));
  const warn = options.warn ?? (() => undefined);
  const label = options.name ?? 'derivation';
  const entry = workerEntry(typeof EPHEMAIL_WORKER_ENTRY === 'string' ? EPHEMAIL_WORKER_ENTRY : undefined, new URL('./worker.ts', import.meta.url), 'derive-worker');
  interface Slot {
    worker: Worker;
    ready: boolean;
    inflight: Map<number, { resolve: (p: unknown) => void; reject: (e: Error) => void; since: number; budgetMs?: number }>;
    outbox: Task[];
    transfer: ArrayBuffer[];
    overBudget?: boolean;
    /** A derivation's inputs kept here whose views' tasks are not all sent: no other budgeted task is sent here. */
    reserved?: HeldAt;
  }
  /** A Held, as the lane knows it: its worker and the derivation task's id (the worker's key of the inputs). */
  interface HeldAt extends Held {
    readonly pending: Set<string>;
    slot: Slot;
    id: number;
  }
  const heldAt = (h: Held) => h as HeldAt;
  const unreserve = (h: HeldAt) => {
    if (h.slot.reserved !== h) return;
    h.slot.reserved = undefined;
    wakeWaiting();
  };
  let slots: Slot[] = [];
  let nextId = 1;
  let closed = false;
  let broken = false; // workers cannot start here: parse on the main thread
  let started = false;
  // A worker stuck on one message (a parser bug, a pathological input) is replaced: its messages get
  // a temporary error instead of holding their sessions until they time out.
  // A task with a budget that runs past it ends its worker the same way (its caller falls back).
  // It looks every 50 ms while any task is in flight, and stops when none is: an idle service wakes
  // for nothing.
  let watchdog: ReturnType<typeof setInterval> | null = null;
  const idleStopMs = options.idleStopMs ?? IDLE_STOP_MS;
  let lastBusy = Date.now();
  /** Stops every worker (the next task starts one again) when none held a task for idleStopMs. */
  let idler: ReturnType<typeof setInterval> | null = null;
  const stopIfIdle = () => {
    if (slots.some((s) => s.inflight.size > 0) || waiting.length > 0) {
      lastBusy = Date.now();
      return;
    }
    if (Date.now() - lastBusy < idleStopMs) return;
    const idle = slots;
    slots = []; // (their exit is then no failure: fail() ignores a slot that is not in `slots`)
    started = false;
    if (idler) clearInterval(idler);
    idler = null;
    for (const s of idle) void s.worker.terminate();
  };
  const idleWatch = () => {
    if (idler || closed || !Number.isFinite(idleStopMs)) return;
    idler = setInterval(stopIfIdle, Math.max(10, Math.min(idleStopMs / 2, 5000)));
    idler.unref();
  };
  const look = () => {
    const now = Date.now();
    let busy = false;
    for (const s of slots) {
      const oldest = s.inflight.values().next().value;
      if (!oldest) continue;
      busy = true;
      if (oldest.budgetMs !== undefined && now - oldest.since > oldest.budgetMs) {
        s.overBudget = true;
        void s.worker.terminate();
      } else if (now - oldest.since > STUCK_MS) void s.worker.terminate();
    }
    if (busy) lastBusy = now;
    if (!busy && watchdog) {
      clearInterval(watchdog);
      watchdog = null;
    }
  };
  const watch = () => {
    if (watchdog || closed) return;
    watchdog = setInterval(look, 50);
    watchdog.unref();
  };
  /** Tasks with a budget wait here for a worker with nothing else to do (since: when first queued). */
  let waiting: { since: number; go: () => void }[] = [];
  /** How long a worker has been on its oldest task (ms; 0 when it has none). */
  const busyFor = (s: Slot): number => {
    const oldest = s.inflight.values().next().value;
    return oldest ? Date.now() - oldest.since : 0;
  };
  /** One more worker once a waiting task has waited GROW_AFTER_MS (and there is room then). */
  let grower: ReturnType<typeof setTimeout> | null = null;
  const oldestWait = () => waiting.reduce((m, w) => Math.min(m, w.since), Infinity);
  const growSoon = () => {
    if (grower || closed || waiting.length === 0) return;
    grower = setTimeout(() => {
      grower = null;
      if (closed || broken || waiting.length === 0 || slots.length >= max || !slots.every((s) => s.ready)) return;
      if (Date.now() - oldestWait() >= GROW_AFTER_MS) slots.push(spawnSlot()); // it wakes the waiting tasks once ready
      else growSoon();
    }, Math.max(1, oldestWait() + GROW_AFTER_MS - Date.now()));
    grower.unref();
  };

  const wakeWaiting = () => {
    if (waiting.length === 0) return;
    const next = waiting;
    waiting = [];
    for (const w of next) w.go();
  };

  const spawnSlot = (): Slot => {
    const worker = new Worker(entry.url, {
      execArgv: entry.execArgv,
      workerData: { preload: options.preload ?? 'parse', background: options.background === true },
      resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_MB, maxOldGenerationSizeMb: options.oldGenerationMb ?? WORKER_OLD_MB },
    });
    worker.unref(); // never keeps the process alive; close() ends it
    lastBusy = Date.now();
    idleWatch();
    const slot: Slot = { worker, ready: false, inflight: new Map(), outbox: [], transfer: [] };
    worker.on('message', (m: Reply) => {
      if ('ready' in m) {
        slot.ready = true;
        wakeWaiting();
        return;
      }
      if ('fatal' in m) {
        worker.emit('error', new Error(m.fatal));
        return;
      }
      for (const r of m.results) {
        const job = slot.inflight.get(r.id);
        if (!job) continue;
        lastBusy = Date.now();
        slot.inflight.delete(r.id);
        // a result that comes after its budget is over it, whether or not the watchdog (every 50 ms)
        // saw it first: the same outcome however fast the worker or the machine
        if (!('value' in r)) job.reject(new Error(`${label} worker: ${r.error}`));
        else if (job.budgetMs !== undefined && lastBusy - job.since > job.budgetMs) job.reject(new BudgetExceededError('over its time budget'));
        else job.resolve(r.value);
      }
      wakeWaiting();
    });
    const fail = (err: Error) => {
      if (!slots.includes(slot)) return;
      slots = slots.filter((s) => s !== slot);
      void worker.terminate();
      if (!slot.ready && !closed) {
        // could not even start (it never held a message): parse on this thread from now on
        broken = true;
        warn(`${label} workers cannot start; working on the main thread`, err);
        wakeWaiting();
        return;
      }
      // out of memory (WORKER_OLD_MB) is over a budget too: the caller falls back as when out of time
      const outOfMemory = (err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY';
      for (const job of slot.inflight.values()) {
        job.reject(slot.overBudget ? new BudgetExceededError('over its time budget', { cause: err }) : outOfMemory ? new BudgetExceededError('over its memory budget', { cause: err }) : err);
      }
      if (!closed) {
        if (outOfMemory) warn(`a ${label} worker ran out of memory; its tasks fall back, starting another`, err);
        else if (!slot.overBudget) warn(`a ${label} worker died; its tasks got a temporary error, starting another`, err);
        slots.push(spawnSlot());
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`${label} worker exited with code ${code}`)));
    return slot;
  };

  const send = (target: Slot, task: Task, opts: RunOptions): Promise<unknown> =>
    new Promise((resolve, reject) => {
      target.inflight.set(task.id, { resolve, reject, since: Date.now(), budgetMs: opts.budgetMs });
      watch();
      // a buffer that is a view into a larger (pooled) one is copied, never transferred
      const raw = task.raw;
      const own = !opts.keepRaw && raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength && raw.buffer instanceof ArrayBuffer && raw.byteLength > 0;
      if (own) target.transfer.push(raw.buffer as ArrayBuffer);
      if (target.outbox.push(task) === 1) {
        setImmediate(() => {
          const tasks = target.outbox;
          const transfer = target.transfer;
          target.outbox = [];
          target.transfer = [];
          if (slots.includes(target)) target.worker.postMessage({ tasks }, transfer);
        });
      }
    });

  /** A view's task on the input `held` keeps: on its worker, alone there (within its budget), once that worker is free. */
  const runOn = (held: HeldAt, opts: RunOptions): Promise<unknown> => {
    const view = opts.options?.view ?? '';
    const slot = held.slot;
    if (closed || !slots.includes(slot) || !held.pending.has(view)) {
      unreserve(held);
      return Promise.reject(new HeldLostError(`the input of ${JSON.stringify(view)} is no longer kept (its worker is gone)`));
    }
    if (slot.inflight.size > 0) return new Promise((resolve, reject) => waiting.push({ since: Date.now(), go: () => runOn(held, opts).then(resolve, reject) }));
    held.pending.delete(view);
    if (held.pending.size === 0) unreserve(held);
    const task: Task = { id: nextId++, op: 'view', raw: EMPTY, limits: { maxAttachmentBytes: 0, maxAttachments: 0 }, options: { ...opts.options, kept: held.id } };
    return send(slot, task, opts);
  };

  const pool: Lane = {
    max,
    get size() {
      return slots.length;
    },
    warm(count = 1) {
      if (closed || broken) return;
      started = true;
      while (slots.length < Math.min(max, count)) slots.push(spawnSlot());
    },
    release(held) {
      const h = heldAt(held);
      h.pending.clear();
      unreserve(h);
    },
    run(op, raw, limits, opts = {}) {
      const options = opts.options ?? {};
      if (opts.on) return runOn(heldAt(opts.on), opts) as Promise<never>;
      const local = () => runOp(op, raw, limits, options) as Promise<never>;
      if (closed || broken) return local();
      if (!started) {
        // started on first use: an idle service pays neither start-up time nor memory for them
        started = true;
        slots.push(spawnSlot());
      }
      const budgeted = opts.budgetMs !== undefined;
      // a budgeted task runs alone on a worker, so its clock measures only its own work
      const pick = (): Slot | null => {
        let slot: Slot | null = null;
        for (const s of slots) {
          if (!s.ready || (budgeted && (s.inflight.size > 0 || s.reserved))) continue;
          if (!slot || s.inflight.size < slot.inflight.size) slot = s;
        }
        return slot;
      };
      let slot = pick();
      let grow = false;
      if (!slot && budgeted && slots.length < max && slots.every((s) => s.ready)) {
        if (slots.length === 0 || slots.every((s) => busyFor(s) >= GROW_AFTER_MS)) slots.push(spawnSlot());
        else grow = true;
      }
      // `offThread` (verdicts: they wait on DNS): never on this thread while workers can start, but
      // sharing a worker with others
      if (!slot && (budgeted || opts.offThread)) {
        // every worker is busy or still starting: wait for one (its budget starts when it is
        // dispatched). A budgeted task never runs on this thread while workers can start.
        const queuedAt = opts.queuedAt ?? Date.now(); // (kept when it queues again after a wake-up)
        return new Promise((resolve, reject) => {
          waiting.push({ since: queuedAt, go: () => pool.run(op, raw, limits, { ...opts, queuedAt }).then(resolve as never, reject) });
          if (grow) growSoon();
        });
      }
      // until a worker is up (loading the parser takes a moment, longer through tsx) this thread works
      if (!slot) return local();
      const target = slot;
      if (!budgeted && target.inflight.size >= 2 && slots.length < max && slots.every((s) => s.ready)) slots.push(spawnSlot());
      const id = nextId++;
      const task: Task = { id, op, raw, limits: { maxAttachmentBytes: limits.maxAttachmentBytes, maxAttachments: limits.maxAttachments }, options, keep: opts.keep };
      const sent = send(target, task, opts);
      if (!opts.keep) return sent as Promise<never>;
      return sent.then((value) => {
        const v = value as KeptDerivation & Partial<Kept>;
        const names = Object.keys(v.kept ?? {});
        if (names.length === 0) return value;
        const held: HeldAt = { pending: new Set(names), slot: target, id };
        // (its worker may be gone already: its views then read their `failed` value)
        if (slots.includes(target)) target.reserved = held;
        v.held = held;
        return value;
      }) as Promise<never>;
    },
    async close() {
      closed = true;
      if (grower) clearTimeout(grower);
      grower = null;
      if (watchdog) clearInterval(watchdog);
      watchdog = null;
      if (idler) clearInterval(idler);
      idler = null;
      const all = slots;
      slots = [];
      const queued = waiting;
      waiting = [];
      for (const w of queued) w.go(); // closed: they run here
      for (const s of all) for (const job of s.inflight.values()) job.reject(new Error('worker pool closed'));
      await Promise.all(all.map((s) => s.worker.terminate()));
    },
  };
  return pool;
}


export type LaneName = 'summary' | 'derive' | 'verdicts';

/** The one pool: a lane per kind of work. */
export interface WorkerPool {
  readonly summary: Lane;
  readonly derive: Lane;
  readonly verdicts: Lane;
  close(): Promise<void>;
}

/**
 * Workers per lane, the one place they are said: the summaries one per core (at most 4); views 2;
 * verdicts 1 (they wait on DNS, one thread runs many). A lane says its own (`Lane.max`), and the
 * scheduler of its work (services/derive-queue.ts) takes it from there.
 */
export const LANE_WORKERS: Readonly<Record<LaneName, number>> = Object.freeze({ summary: Math.min(4, availableParallelism()), derive: 2, verdicts: 1 });

export function createWorkerPool(options: { warn?: LaneOptions['warn']; workers?: Partial<Record<LaneName, number>> } = {}): WorkerPool {
  const lane = (name: LaneName, preload: LaneOptions['preload'] = 'parse', background = false) =>
    createLane({ name, preload, background, warn: options.warn, workers: options.workers?.[name] ?? LANE_WORKERS[name] });
  // verdicts are on no 250's path: their worker runs at a lower priority, so under load ingest comes first
  const lanes = { summary: lane('summary'), derive: lane('derive'), verdicts: lane('verdicts', 'authenticate', true) };
  return {
    ...lanes,
    close: async () => {
      await Promise.all(Object.values(lanes).map((l) => l.close()));
    },
  };
}
