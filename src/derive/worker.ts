// The entry of a derivation worker (pool.ts starts it): runs the tasks it is sent (ops.ts) and
// answers in batches, one postMessage per turn of the event loop each way (a post costs more than
// the copy of a small message). Bytes of results go back transferred, not copied.
// A derivation task with `keep` leaves its `worker` views' inputs here (ops.ts keepInputs), by its
// id, for the view tasks that follow on this worker (`options.kept`): each input is read once.
import { constants, setPriority } from 'node:os';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { keepInputs, preload, runOp, runView, type Op, type OpOptions } from './ops.ts';
import type { ParseLimits } from './mime.ts';
import type { DerivedMessage } from './views.ts';

export interface Task {
  id: number;
  op: Op;
  raw: Uint8Array;
  limits: ParseLimits;
  options: OpOptions;
  /** A derivation's: keep its `worker` views' inputs on this worker. */
  keep?: boolean;
}

/**
 * Derivations whose inputs a worker keeps at once, at most: the pool sends a kept input's task
 * before another derivation to that worker (pool.ts reserves it), so one is the rule; past this the
 * oldest are dropped (their view reads its `failed` value).
 */
export const KEPT_MAX = 4;
export type Result = { id: number; value: unknown } | { id: number; error: string };
export type Reply = { results: Result[] } | { ready: true } | { fatal: string };

/** Every distinct ArrayBuffer behind the bytes of a result (the kept parts, or the stored bytes of a summary). */
export function transferables(v: unknown): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  const o = v as { parts?: Uint8Array[]; raw?: Uint8Array } | null;
  const bufs = o && Array.isArray(o.parts) ? o.parts : o && o.raw instanceof Uint8Array ? [o.raw] : [];
  for (const u of bufs) if (u.buffer instanceof ArrayBuffer && u.buffer.byteLength > 0) seen.add(u.buffer);
  return [...seen];
}

/** Serves tasks on this worker's port until the worker is ended. */
function serve(port: MessagePort): void {
  const nextTurn = globalThis.setImmediate;
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
  /** The inputs kept by derivation tasks, by task id (this worker's own: they end with it). */
  const kept = new Map<number, Map<string, string>>();
  const run = async (t: Task): Promise<unknown> => {
    if (t.options.kept !== undefined) {
      const inputs = kept.get(t.options.kept);
      const input = inputs?.get(t.options.view ?? '');
      if (input === undefined) throw new Error(`no kept input of ${JSON.stringify(t.options.view)}`);
      inputs!.delete(t.options.view!);
      if (inputs!.size === 0) kept.delete(t.options.kept);
      return runView(t.options, input);
    }
    const value = await runOp(t.op, t.raw, t.limits, t.options);
    if (!t.keep) return value;
    const { result, inputs } = await keepInputs(value as DerivedMessage, t.options);
    if (Object.keys(inputs).length === 0) return result;
    kept.set(t.id, new Map(Object.entries(inputs)));
    for (const id of kept.keys()) if (kept.size > KEPT_MAX) kept.delete(id);
    return result;
  };
  port.on('message', ({ tasks }: { tasks: Task[] }) => {
    for (const t of tasks) {
      run(t).then(
        (value) => send({ id: t.id, value }, transferables(value)),
        (err: unknown) => send({ id: t.id, error: String((err as Error)?.message ?? err) }, []),
      );
    }
  });
  const data = (workerData ?? {}) as { preload?: 'parse' | 'authenticate'; background?: boolean };
  preload(data.preload ?? 'parse').then(
    () => {
      // lowered once loaded (a start under load is not slowed): pid 0 is this thread only, on Linux
      if (data.background) {
        try {
          setPriority(0, constants.priority.PRIORITY_BELOW_NORMAL);
        } catch {
          // not permitted here: the worker runs at the process's priority
        }
      }
      port.postMessage({ ready: true } satisfies Reply);
    },
    (err: unknown) => port.postMessage({ fatal: String((err as Error)?.stack ?? err) } satisfies Reply),
  );
}

if (parentPort) serve(parentPort);
