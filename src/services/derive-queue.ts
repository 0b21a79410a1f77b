// The one scheduler of derivation work (docs/decisions.md "Derived views", docs/security.md "Body
// search", docs/authentication.md): who runs next when more work waits than may run at once. Each
// kind of derivation has an instance with its own limits (the views on the `derive` lane's workers,
// the verdicts on theirs); the rules are the same:
//   - by class: a reader opening an email (`read`) before rows of a list (`list`), before work nobody
//     waits for (`background`: search-text backfills, spam scores asked again, new mail's verdicts);
//   - within a class, round-robin over callers (an IP bucket, a key, a sending client), each caller's
//     own work in order;
//   - a caller holds at most `perOwner` slots at once (a job may name a second owner it counts
//     against too: a verdict's envelope domain beside its client), and `list` and `background` work
//     together at most `lowSlots`: with two workers, no one caller and no list can take both, so a
//     reader always finds one that someone else's long derivation does not hold for long;
//   - a caller has at most `maxWaitingPerOwner` jobs waiting; past that, rate_limited;
//   - bursts yield: while `busy()` says ingest is in a burst, `background` work waits (looked at
//     again every `busyRetryMs`), so it takes no CPU from the 250s.
// A job waiting for a slot can be promoted when a more urgent caller asks for the same work.
import { AppError } from '../domain/errors.ts';

export type Priority = 'read' | 'list' | 'background';
const RANK: Record<Priority, number> = { read: 0, list: 1, background: 2 };
const BACKGROUND = RANK.background;

export interface DeriveQueueOptions {
  /** Jobs running at once (the derivation workers, or what one worker runs at once). */
  slots: number;
  /** Jobs of one owner running at once; default max(1, slots - 1). */
  perOwner?: number;
  /** `list` and `background` jobs running at once; default max(1, slots - 1). */
  lowSlots?: number;
  /** Jobs of one owner waiting at once; default 200. */
  maxWaitingPerOwner?: number;
  /** Whether ingest is in a burst now: `background` jobs then wait. Default: never. */
  busy?: () => boolean;
  /** How long `background` work waits before the burst is looked at again (default 250 ms). */
  busyRetryMs?: number;
  /** Called when a job ends, after the next ones started (what waits for the queue to empty looks then). */
  onSettled?: () => void;
}

export interface Ticket<T> {
  promise: Promise<T>;
  /** A caller of higher class asks for the same work: it waits as that caller's, in that class. */
  promote(owner: string, priority: Priority): void;
}

export interface DeriveQueue {
  /** Runs `task` once a slot is free for it (see above). */
  enqueue<T>(owner: string, priority: Priority, task: () => Promise<T>): Ticket<T>;
  /**
   * Runs `task` as `enqueue` does, for work whose caller waits for nothing (no promise, no ticket):
   * `task` handles its own failures. `also`: a second owner the job counts against (its cap, not
   * its turn). Refused (false) past the owner's waiting cap.
   */
  submit(owner: string, priority: Priority, task: () => Promise<unknown>, also?: string | null): boolean;
  readonly running: number;
  readonly waiting: number;
  /** Every waiting job starts now, without limits (shutdown: the pool then works on this thread). */
  drain(): void;
  /** Forgets every waiting job (they never run; shutdown). */
  clear(): void;
}

interface Job {
  owner: string;
  also: string | null;
  rank: number;
  start(): void;
  /** Still waiting (not started). */
  waiting: boolean;
}

export function createDeriveQueue(options: DeriveQueueOptions): DeriveQueue {
  const slots = Math.max(1, options.slots);
  const perOwner = options.perOwner ?? Math.max(1, slots - 1);
  const lowSlots = options.lowSlots ?? Math.max(1, slots - 1);
  const maxWaiting = options.maxWaitingPerOwner ?? 200;
  const busy = options.busy;
  const busyRetryMs = options.busyRetryMs ?? 250;
  const settled = options.onSettled;
  /** Per class: owner → their waiting jobs, oldest first; map order is the round-robin order. */
  const queues: Map<string, Job[]>[] = [new Map(), new Map(), new Map()];
  /** Jobs running by owner (and by second owner). */
  const runningBy = new Map<string, number>();
  const waitingBy = new Map<string, number>();
  let running = 0;
  let lowRunning = 0;
  let waiting = 0;
  let draining = false;
  /** The look again at background work after a burst. */
  let wake: ReturnType<typeof setTimeout> | null = null;

  const count = (m: Map<string, number>, owner: string | null, d: number) => {
    if (owner === null) return;
    const n = (m.get(owner) ?? 0) + d;
    if (n > 0) m.set(owner, n);
    else m.delete(owner);
  };
  const full = (owner: string | null) => owner !== null && (runningBy.get(owner) ?? 0) >= perOwner;
  const file = (job: Job) => {
    const q = queues[job.rank];
    const list = q.get(job.owner);
    if (list) list.push(job);
    else q.set(job.owner, [job]);
    count(waitingBy, job.owner, 1);
    waiting++;
  };
  const unfile = (job: Job) => {
    const q = queues[job.rank];
    const list = q.get(job.owner);
    const at = list ? list.indexOf(job) : -1;
    if (!list || at < 0) return;
    list.splice(at, 1);
    if (list.length === 0) q.delete(job.owner);
    count(waitingBy, job.owner, -1);
    waiting--;
  };
  /** The next job allowed to start, taken off its queue; null when none may start now. */
  const next = (): Job | null => {
    for (let rank = 0; rank < queues.length; rank++) {
      const q = queues[rank];
      if (q.size === 0) continue;
      if (rank > 0 && lowRunning >= lowSlots && !draining) return null;
      if (rank === BACKGROUND && busy && !draining && busy()) {
        // ingest is in a burst: background work waits for a quieter moment (looked at again then)
        wake ??= setTimeout(() => {
          wake = null;
          pump();
        }, busyRetryMs);
        return null;
      }
      for (const [owner, list] of q) {
        if (!draining && (full(owner) || full(list[0].also))) continue;
        const job = list.shift()!;
        q.delete(owner);
        if (list.length) q.set(owner, list); // to the back of the round
        count(waitingBy, owner, -1);
        waiting--;
        return job;
      }
    }
    return null;
  };
  const pump = () => {
    while (running < slots || draining) {
      const job = next();
      if (!job) return;
      job.waiting = false;
      running++;
      if (job.rank > 0) lowRunning++;
      count(runningBy, job.owner, 1);
      count(runningBy, job.also, 1);
      job.start();
    }
  };
  /** A job ended: its slot is free. */
  const ended = (job: Job) => {
    running--;
    if (job.rank > 0) lowRunning--;
    count(runningBy, job.owner, -1);
    count(runningBy, job.also, -1);
    pump();
    settled?.();
  };
  const refused = (owner: string) => (waitingBy.get(owner) ?? 0) >= maxWaiting && !draining;

  return {
    get running() {
      return running;
    },
    get waiting() {
      return waiting;
    },
    drain() {
      draining = true;
      pump();
    },
    clear() {
      for (const q of queues) q.clear();
      waitingBy.clear();
      waiting = 0;
      if (wake) clearTimeout(wake);
      wake = null;
    },
    submit(owner, priority, task, also = null) {
      if (refused(owner)) return false;
      const job: Job = {
        owner,
        also,
        rank: RANK[priority],
        waiting: true,
        start() {
          const done = () => ended(job);
          let p: Promise<unknown>;
          try {
            p = task();
          } catch {
            p = Promise.resolve();
          }
          p.then(done, done);
        },
      };
      file(job);
      pump();
      return true;
    },
    enqueue<T>(owner: string, priority: Priority, task: () => Promise<T>): Ticket<T> {
      if (refused(owner)) {
        const no = Promise.reject(new AppError('rate_limited', 'Too many emails of this caller are waiting to be read for the first time; retry in a moment', { retryAfter: 1 }));
        return { promise: no, promote: () => undefined };
      }
      let job!: Job;
      const promise = new Promise<T>((resolve, reject) => {
        job = {
          owner,
          also: null,
          rank: RANK[priority],
          waiting: true,
          start() {
            let p: Promise<T>;
            try {
              p = task();
            } catch (err) {
              p = Promise.reject(err);
            }
            p.then((v) => {
              ended(job);
              resolve(v);
            }, (err) => {
              ended(job);
              reject(err);
            });
          },
        };
      });
      file(job);
      pump();
      return {
        promise,
        promote(by, prio) {
          if (!job.waiting || RANK[prio] >= job.rank) return;
          unfile(job);
          job.owner = by;
          job.rank = RANK[prio];
          file(job);
          pump();
        },
      };
    },
  };
}

/**
 * Whether ingest is in a burst: more than `messages` stored in one of the last two windows of
 * `windowMs` (real time: `monotonic`, default performance.now; a test moves its own). Ingest counts
 * each message (`arrived`); a scheduler's `busy` reads it.
 */
export function createBurstGauge(options: { windowMs: number; messages: number; monotonic?: () => number }): { arrived(): void; busy(): boolean } {
  const { windowMs, messages } = options;
  const monotonic = options.monotonic ?? (() => performance.now());
  let windowAt = 0;
  let inWindow = 0;
  let inPrevious = 0;
  return {
    arrived() {
      const t = monotonic();
      if (t - windowAt >= windowMs) {
        inPrevious = t - windowAt >= 2 * windowMs ? 0 : inWindow;
        inWindow = 0;
        windowAt = t;
      }
      inWindow++;
    },
    busy() {
      const t = monotonic();
      if (t - windowAt >= 2 * windowMs) return false;
      if (t - windowAt >= windowMs) return inWindow > messages;
      return inWindow > messages || inPrevious > messages;
    },
  };
}
