// The one long-poll path (HTTP `wait` and MCP `check_inbox`): subscribe to the bus first, then
// query; hold until the delivery event, the deadline, the client's disconnect or shutdown.
import type { Bus } from '../bus/bus.ts';

export interface WaitRegistry {
  /** Resolves every held wait now (shutdown answers them with their empty result). */
  releaseAll(): void;
  readonly held: number;
  /**
   * Runs `query` until it returns a non-empty result or `ms` elapse. `query` runs once at once;
   * again after each delivery event for `address`. Returns the last result and whether it held.
   */
  hold<T extends unknown[]>(address: string, ms: number, query: () => Promise<T>, signal?: AbortSignal): Promise<{ result: T; waited: boolean }>;
}

export function createWaitRegistry(bus: Bus): WaitRegistry {
  const releasers = new Set<() => void>();
  let closing = false;
  return {
    get held() {
      return releasers.size;
    },
    releaseAll() {
      closing = true;
      for (const r of [...releasers]) r();
    },
    async hold(address, ms, query, signal) {
      if (ms <= 0 || closing || signal?.aborted) return { result: await query(), waited: false };
      let wake: (() => void) | null = null;
      let pending = false; // an event arrived while a query was running
      const unsubscribe = bus.subscribe(address, () => {
        pending = true;
        wake?.();
      });
      try {
        let result = await query();
        if (result.length > 0) return { result, waited: false };
        const deadline = Date.now() + ms;
        let done = false;
        const finish = () => {
          done = true;
          wake?.();
        };
        const timer = setTimeout(finish, ms);
        signal?.addEventListener('abort', finish, { once: true });
        releasers.add(finish);
        try {
          while (!done && !closing && Date.now() < deadline) {
            if (!pending) await new Promise<void>((resolve) => (wake = resolve));
            wake = null;
            if (done || closing) break;
            pending = false;
            result = await query();
            if (result.length > 0) break;
          }
        } finally {
          clearTimeout(timer);
          signal?.removeEventListener('abort', finish);
          releasers.delete(finish);
        }
        return { result, waited: true };
      } finally {
        unsubscribe();
      }
    },
  };
}
