// MIME work off the main thread: a small pool of worker_threads running parse.ts. The main thread
// keeps the SMTP protocol, HTTP and SQLite reads; summarize() at ingest and deriveViews() on first
// read (postal-mime, the HTML sanitizer, html→text) run on the other cores. A worker that dies fails
// only the tasks it held (an ingest gets a temporary 451, so the sender retries: nothing acknowledged
// is lost); a task with a budget that runs past it ends its worker (the caller falls back); a pool
// whose workers cannot start at all works on the main thread instead.
import { availableParallelism, constants, setPriority } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { HtmlCheck } from '../domain/html-check.ts';
import type { Authentication, AuthTask } from './authenticate.ts';
import type { DerivedMessage, DeriveOptions, MessageSummary, ParseLimits } from './parse.ts';

// The parser (postal-mime, sanitize-html, html-to-text) is loaded on first use: in the main thread
// only when it parses itself (until a worker is up, or when workers cannot start), so an idle
// service neither loads nor holds it (start-up time and idle memory, bench/README.md).
let parser: Promise<typeof import('./parse.ts')> | null = null;
const loadParser = () => (parser ??= import('./parse.ts'));

// The HTML compatibility check (caniemail's data) is loaded on first use too, in the worker.
let htmlChecker: Promise<typeof import('../domain/html-check-run.ts')> | null = null;
const loadHtmlChecker = () => (htmlChecker ??= import('../domain/html-check-run.ts'));

/**
 * The operations a worker runs: `htmlcheck` takes the HTML (UTF-8) instead of a message;
 * `authenticate` gives the verdicts of authenticate.ts, with `options.auth`.
 */
export type Op = 'summarize' | 'derive' | 'fallback' | 'htmlcheck' | 'authenticate';
type OpResult<O extends Op> = O extends 'summarize' ? MessageSummary : O extends 'htmlcheck' ? HtmlCheck : O extends 'authenticate' ? Authentication : DerivedMessage;
type AnyResult = MessageSummary | DerivedMessage | HtmlCheck | Authentication;
/** Options of an operation: the derivation's, and for `authenticate` the task. */
export type OpOptions = DeriveOptions & { auth?: AuthTask };

let authModule: Promise<typeof import('./authenticate.ts')> | null = null;

function runOp(op: Op, raw: Uint8Array, limits: ParseLimits, options: OpOptions): Promise<AnyResult> {
  if (op === 'htmlcheck') {
    return loadHtmlChecker().then((m) => {
      const html = new TextDecoder('utf-8', { fatal: false }).decode(raw);
      return m.checkHtml(html.slice(0, m.HTML_CHECK_MAX_CHARS), html.length > m.HTML_CHECK_MAX_CHARS);
    });
  }
  if (op === 'authenticate') {
    if (!options.auth) return Promise.reject(new Error('authenticate without a task'));
    const task = options.auth;
    return (authModule ??= import('./authenticate.ts')).then((m) => m.authenticateMessage(raw, task));
  }
  return loadParser().then((m): Promise<MessageSummary | DerivedMessage> =>
    op === 'summarize' ? m.summarize(raw, limits) : op === 'derive' ? m.deriveViews(raw, limits, options) : m.fallbackViews(raw, 'parse_over_budget'));
}

/** A task that ran past its budget; its worker was ended. */
export class BudgetExceededError extends Error {}

export interface ParsePool {
  /**
   * Runs one operation on a raw message. `raw` is transferred to the worker unless `keepRaw` (then
   * it is copied). With `budgetMs`, the task runs alone on a worker and rejects with
   * BudgetExceededError when it takes longer (the worker is replaced). With `offThread`, it waits for
   * a worker instead of running on this thread until one is up (and shares it with other tasks).
   */
  run<O extends Op>(op: O, raw: Uint8Array, limits: ParseLimits, opts?: { options?: OpOptions; budgetMs?: number; keepRaw?: boolean; offThread?: boolean }): Promise<OpResult<O>>;
  /**
   * Starts workers now instead of on the first task, up to `count` (default 1) and the pool's most
   * (idempotent): a task that needs one then finds it ready instead of waiting for it to start.
   */
  warm(count?: number): void;
  /** Stops the workers; later parses run on the main thread. */
  close(): Promise<void>;
  /** Workers running now (0 before the first parse, or when parsing on the main thread). */
  readonly size: number;
}

interface Task {
  id: number;
  op: Op;
  raw: Uint8Array;
  limits: ParseLimits;
  options: OpOptions;
}
type Result = { id: number; value: AnyResult } | { id: number; error: string };
// Messages travel in batches (one postMessage per turn of the event loop, each way): a post costs
// more than the copy of a small message.
type Reply = { results: Result[] } | { ready: true } | { fatal: string };

// Captured at load: a test's fake timers must not stall parsing.
const nextTurn = globalThis.setImmediate;

const WORKER_FLAG = 'ephemailParseWorker';
/** A parse taking longer than this means the worker is stuck (a 30 MiB message parses in seconds). */
const STUCK_MS = 60_000;

/** Every distinct ArrayBuffer behind the bytes of a result (transferred back, not copied). */
function transferables(v: AnyResult): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  const bufs = 'parts' in v ? v.parts : 'raw' in v ? [v.raw] : [];
  for (const u of bufs) if (u.buffer instanceof ArrayBuffer && u.buffer.byteLength > 0) seen.add(u.buffer);
  return [...seen];
}

// Loads this file inside the worker; through tsx when the sources are TypeScript and the worker did
// not inherit a loader (bin/ephemail.js registers tsx at run time, which workers do not inherit).
const BOOTSTRAP = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  try {
    await import(workerData.entry);
  } catch (err) {
    if (!workerData.tsx || (err && err.code) !== 'ERR_UNKNOWN_FILE_EXTENSION') throw err;
    const { register } = await import(workerData.tsx);
    register();
    await import(workerData.entry + '?tsx'); // a new specifier: the failed import stays cached
  }
})().catch((err) => parentPort.postMessage({ fatal: String((err && err.stack) || err) }));
`;

function tsxEntry(): string | null {
  if (!import.meta.url.endsWith('.ts')) return null;
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return null;
  }
}

export interface ParsePoolOptions {
  /**
   * Most workers; default: one per core, at most 4. One starts with the first message; another
   * whenever every running one already holds two messages (HTML-heavy mail keeps a core busy each).
   */
  workers?: number;
  /** Warnings (a worker died, the pool fell back to the main thread). */
  warn?: (msg: string, err?: unknown) => void;
  /** What a worker loads before it is ready: the parser (default), or the authentication checks. */
  preload?: 'parse' | 'authenticate';
  /**
   * Workers run at a lower CPU priority (nice 10, a thread's own on Linux) once loaded, for work on no
   * client's path: under load the rest of the process comes first (docs/decisions.md).
   */
  background?: boolean;
}

export function createParsePool(options: ParsePoolOptions = {}): ParsePool {
  const max = Math.max(1, options.workers ?? Math.min(4, availableParallelism()));
  const warn = options.warn ?? (() => undefined);
  const tsx = tsxEntry();
  interface Slot {
    worker: Worker;
    ready: boolean;
    inflight: Map<number, { resolve: (p: AnyResult) => void; reject: (e: Error) => void; since: number; budgetMs?: number }>;
    outbox: Task[];
    transfer: ArrayBuffer[];
    overBudget?: boolean;
  }
  let slots: Slot[] = [];
  let nextId = 1;
  let closed = false;
  let broken = false; // workers cannot start here: parse on the main thread
  let started = false;
  // A worker stuck on one message (a parser bug, a pathological input) is replaced: its messages get
  // a temporary error instead of holding their sessions until they time out.
  // A task with a budget that runs past it ends its worker the same way (its caller falls back).
  const watchdog = setInterval(() => {
    const now = Date.now();
    for (const s of slots) {
      const oldest = s.inflight.values().next().value;
      if (!oldest) continue;
      if (oldest.budgetMs !== undefined && now - oldest.since > oldest.budgetMs) {
        s.overBudget = true;
        void s.worker.terminate();
      } else if (now - oldest.since > STUCK_MS) void s.worker.terminate();
    }
  }, 50);
  watchdog.unref();
  /** Tasks with a budget wait here for a worker with nothing else to do. */
  let waiting: (() => void)[] = [];

  const wakeWaiting = () => {
    if (waiting.length === 0) return;
    const next = waiting;
    waiting = [];
    for (const w of next) w();
  };

  const spawnSlot = (): Slot => {
    const worker = new Worker(BOOTSTRAP, { eval: true, workerData: { [WORKER_FLAG]: true, entry: import.meta.url, tsx, preload: options.preload ?? 'parse', background: options.background === true } });
    worker.unref(); // never keeps the process alive; close() ends it
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
        slot.inflight.delete(r.id);
        if ('value' in r) job.resolve(r.value);
        else job.reject(new Error(`parse worker: ${r.error}`));
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
        warn('parse workers cannot start; parsing on the main thread', err);
        wakeWaiting();
        return;
      }
      for (const job of slot.inflight.values()) job.reject(slot.overBudget ? new BudgetExceededError('over its time budget', { cause: err }) : err);
      if (!closed) {
        if (!slot.overBudget) warn('a parse worker died; its tasks got a temporary error, starting another', err);
        slots.push(spawnSlot());
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`parse worker exited with code ${code}`)));
    return slot;
  };

  const pool: ParsePool = {
    get size() {
      return slots.length;
    },
    warm(count = 1) {
      if (closed || broken) return;
      started = true;
      while (slots.length < Math.min(max, count)) slots.push(spawnSlot());
    },
    run(op, raw, limits, opts = {}) {
      const options = opts.options ?? { html: true };
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
          if (!s.ready || (budgeted && s.inflight.size > 0)) continue;
          if (!slot || s.inflight.size < slot.inflight.size) slot = s;
        }
        return slot;
      };
      let slot = pick();
      if (!slot && budgeted && slots.length < max && slots.every((s) => s.ready)) slots.push(spawnSlot());
      // `offThread` (verdicts: they wait on DNS): never on this thread while workers can start, but
      // sharing a worker with others
      if (!slot && (budgeted || opts.offThread)) {
        // every worker is busy or still starting: wait for one (its budget starts when it is
        // dispatched). A budgeted task never runs on this thread while workers can start.
        return new Promise((resolve, reject) => {
          waiting.push(() => pool.run(op, raw, limits, opts).then(resolve as never, reject));
        });
      }
      // until a worker is up (loading the parser takes a moment, longer through tsx) this thread works
      if (!slot) return local();
      const target = slot;
      if (!budgeted && target.inflight.size >= 2 && slots.length < max && slots.every((s) => s.ready)) slots.push(spawnSlot());
      const id = nextId++;
      const task: Task = { id, op, raw, limits: { maxAttachmentBytes: limits.maxAttachmentBytes, maxAttachments: limits.maxAttachments }, options };
      return new Promise((resolve, reject) => {
        target.inflight.set(id, { resolve: resolve as never, reject, since: Date.now(), budgetMs: opts.budgetMs });
        // a buffer that is a view into a larger (pooled) one is copied, never transferred
        const own = !opts.keepRaw && raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength && raw.buffer instanceof ArrayBuffer;
        if (own) target.transfer.push(raw.buffer as ArrayBuffer);
        if (target.outbox.push(task) === 1) {
          nextTurn(() => {
            const tasks = target.outbox;
            const transfer = target.transfer;
            target.outbox = [];
            target.transfer = [];
            if (slots.includes(target)) target.worker.postMessage({ tasks }, transfer);
          });
        }
      });
    },
    async close() {
      closed = true;
      clearInterval(watchdog);
      const all = slots;
      slots = [];
      const queued = waiting;
      waiting = [];
      for (const w of queued) w(); // closed: they run here
      for (const s of all) for (const job of s.inflight.values()) job.reject(new Error('parse pool closed'));
      await Promise.all(all.map((s) => s.worker.terminate()));
    },
  };
  return pool;
}

/**
 * postal-mime joins each part's decoded chunks with `new Blob(chunks).arrayBuffer()`; Node's Blob
 * turns that into an asynchronous stream read, a large share of a parse (profile in bench/README.md).
 * The parse worker runs nothing but the parser, so there Blob only concatenates.
 */
class ConcatBlob {
  readonly type: string;
  readonly #bytes: Uint8Array;
  constructor(parts: Iterable<ArrayBuffer | ArrayBufferView | string | ConcatBlob> = [], options: { type?: string } = {}) {
    const list: Uint8Array[] = [];
    let size = 0;
    for (const p of parts) {
      const u = typeof p === 'string' ? new TextEncoder().encode(p)
        : p instanceof ConcatBlob ? p.#bytes
        : ArrayBuffer.isView(p) ? new Uint8Array(p.buffer, p.byteOffset, p.byteLength)
        : new Uint8Array(p);
      list.push(u);
      size += u.byteLength;
    }
    const bytes = new Uint8Array(size);
    let at = 0;
    for (const u of list) {
      bytes.set(u, at);
      at += u.byteLength;
    }
    this.#bytes = bytes;
    this.type = options.type ?? '';
  }
  get size(): number {
    return this.#bytes.byteLength;
  }
  arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(this.#bytes.buffer as ArrayBuffer);
  }
  text(): Promise<string> {
    return Promise.resolve(new TextDecoder().decode(this.#bytes));
  }
  get [Symbol.toStringTag](): string {
    return 'Blob';
  }
}

// ---- worker side ----
if (!isMainThread && parentPort && (workerData as Record<string, unknown> | null)?.[WORKER_FLAG]) {
  (globalThis as { Blob: unknown }).Blob = ConcatBlob;
  const port = parentPort;
  let results: Result[] = [];
  let transfer: ArrayBuffer[] = [];
  const send = (r: Result, t: ArrayBuffer[]) => {
    if (results.push(r) === 1) {
      nextTurn(() => {
        port.postMessage({ results }, transfer);
        results = [];
        transfer = [];
      });
    }
    transfer.push(...t);
  };
  port.on('message', ({ tasks }: { tasks: Task[] }) => {
    for (const t of tasks) {
      runOp(t.op, t.raw, t.limits, t.options).then(
        (value) => send({ id: t.id, value }, transferables(value)),
        (err: unknown) => send({ id: t.id, error: String((err as Error)?.message ?? err) }, []),
      );
    }
  });
  ((workerData as { preload?: string }).preload === 'authenticate' ? (authModule ??= import('./authenticate.ts')) : loadParser()).then(
    () => {
      // lowered once loaded (a start under load is not slowed): pid 0 is this thread only, on Linux
      if ((workerData as { background?: boolean }).background) {
        try {
          setPriority(0, constants.priority.PRIORITY_BELOW_NORMAL);
        } catch {
          // not permitted here: the worker runs at the process's priority
        }
      }
      port.postMessage({ ready: true });
    },
    (err: unknown) => port.postMessage({ fatal: String((err as Error)?.stack ?? err) }),
  );
}
