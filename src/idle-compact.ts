// Gives memory back when the service is quiet. V8 runs a full collection only when its heap grows
// past a limit, never because the process went idle: after start-up (module code, route setup,
// schemas) or after a burst of mail and reads, the garbage stays in the old generation and the young
// generation stays at its largest size, RSS that a quiet service never uses (docs/architecture.md
// "Memory": 101 -> 89 MB idle after start, measured). So once after start, and then whenever the
// whole process (every thread) used under 2% of a core over the last check interval while the heap
// grew by 4 MB or more since the last collection, one full collection runs (20-60 ms, at a moment
// nothing waits for it). Under load it never runs: V8's own collector paces itself there.
//
// The collector is reached as Jest's leak detector and Node's own test runner reach it: the
// --expose-gc flag set at run time and `gc` read from a fresh context, so the process's global scope
// gets no `gc` and it works however node was started (npm start, npx, the image, tests).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface IdleCompactOptions {
  /** How often the process's CPU time is read (default 10 s). */
  everyMs?: number;
  /** The first collection, after start-up (default 2 s). */
  afterStartMs?: number;
  /** Called after each collection (a metric). */
  onCollect?: () => void;
}

const QUIET_CPU_SHARE = 0.02;
const MIN_GROWTH_BYTES = 4 * 1024 * 1024;

function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Starts the checks; the returned function stops them. */
export function startIdleCompaction(options: IdleCompactOptions = {}): () => void {
  const everyMs = options.everyMs ?? 10_000;
  const gc = collector();
  let heapAfter = Number.POSITIVE_INFINITY; // the heap after the last collection (none yet)
  let cpuBefore = process.cpuUsage();
  const collect = () => {
    gc();
    heapAfter = process.memoryUsage().heapUsed;
    options.onCollect?.();
  };
  const first = setTimeout(collect, options.afterStartMs ?? 2_000);
  const check = setInterval(() => {
    const cpu = process.cpuUsage(cpuBefore);
    cpuBefore = process.cpuUsage();
    const busyMs = (cpu.user + cpu.system) / 1000;
    if (busyMs > everyMs * QUIET_CPU_SHARE) return;
    if (process.memoryUsage().heapUsed - heapAfter < MIN_GROWTH_BYTES) return;
    collect();
  }, everyMs);
  first.unref();
  check.unref();
  return () => {
    clearTimeout(first);
    clearInterval(check);
  };
}
