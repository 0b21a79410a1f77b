// Who derives next (docs/decisions.md "Derived views", docs/security.md "Body search"). Derivations
// share a few workers; this decides the order in which callers get them:
//   - by class: a reader opening an email (`read`) before rows of a list (`list`), before work nobody
//     waits for (`background`);
//   - within a class, round-robin over callers (an IP bucket, a key), each caller's own work in order;
//   - a caller holds at most `perOwner` workers at once, and `list` and `background` work together at
//     most `lowSlots`: with two workers, no one caller and no list can take both, so a reader always
//     finds one that someone else's long derivation does not hold for long;
//   - a caller has at most `maxWaitingPerOwner` derivations waiting; past that, rate_limited.
// A job waiting for a worker can be promoted when a more urgent caller asks for the same message.
import { AppError } from '../domain/errors.ts';

export type Priority = 'read' | 'list' | 'background';
const RANK: Record<Priority, number> = { read: 0, list: 1, background: 2 };

export interface DeriveQueueOptions {
  /** Jobs running at once (the derivation workers). */
  slots: number;
  /** Jobs of one owner running at once; default max(1, slots - 1). */
  perOwner?: number;
  /** `list` and `background` jobs running at once; default max(1, slots - 1). */
  lowSlots?: number;
  /** Jobs of one owner waiting at once; default 200. */
  maxWaitingPerOwner?: number;
}

export interface Ticket<T> {
  promise: Promise<T>;
  /** A caller of higher class asks for the same work: it waits as that caller's, in that class. */
  promote(owner: string, priority: Priority): void;
}

export interface DeriveQueue {
  /** Runs `task` once a worker is free for it (see above). */
  enqueue<T>(owner: string, priority: Priority, task: () => Promise<T>): Ticket<T>;
  readonly running: number;
  readonly waiting: number;
  /** Every waiting job starts now, without limits (shutdown: the pool then works on this thread). */
  drain(): void;
}

interface Job {
  owner: string;
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
  /** Per class: owner → their waiting jobs, oldest first; map order is the round-robin order. */
  const queues: Map<string, Job[]>[] = [new Map(), new Map(), new Map()];
  const runningBy = new Map<string, number>();
  const waitingBy = new Map<string, number>();
  let running = 0;
  let lowRunning = 0;
  let waiting = 0;
  let draining = false;

  const count = (m: Map<string, number>, owner: string, d: number) => {
    const n = (m.get(owner) ?? 0) + d;
    if (n > 0) m.set(owner, n);
    else m.delete(owner);
  };
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
      if (rank > 0 && lowRunning >= lowSlots && !draining) return null;
      const q = queues[rank];
      for (const [owner, list] of q) {
        if ((runningBy.get(owner) ?? 0) >= perOwner && !draining) continue;
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
      job.start();
    }
  };

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
    enqueue<T>(owner: string, priority: Priority, task: () => Promise<T>): Ticket<T> {
      if ((waitingBy.get(owner) ?? 0) >= maxWaiting && !draining) {
        const refused = Promise.reject(new AppError('rate_limited', 'Too many emails of this caller are waiting to be read for the first time; retry in a moment', { retryAfter: 1 }));
        return { promise: refused, promote: () => undefined };
      }
      let job!: Job;
      const promise = new Promise<T>((resolve, reject) => {
        job = {
          owner,
          rank: RANK[priority],
          waiting: true,
          start() {
            const { owner: ran, rank } = job;
            const done = () => {
              running--;
              if (rank > 0) lowRunning--;
              count(runningBy, ran, -1);
              pump();
            };
            let p: Promise<T>;
            try {
              p = task();
            } catch (err) {
              p = Promise.reject(err);
            }
            p.then((v) => {
              done();
              resolve(v);
            }, (err) => {
              done();
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
