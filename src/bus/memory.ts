// In-process bus: a map from address to its listeners.
import type { Bus, MailListener } from './bus.ts';

export function createMemoryBus(): Bus & { deliverLocal(address: string, emailId: string): void } {
  const listeners = new Map<string, Set<MailListener>>();
  const deliverLocal = (address: string, emailId: string) => {
    const set = listeners.get(address);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(emailId);
      } catch {
        // a listener's failure must not stop the others
      }
    }
  };
  return {
    capabilities: { orderedAcrossNodes: true },
    deliverLocal,
    async publish(address, emailId) {
      deliverLocal(address, emailId);
    },
    subscribe(address, listener) {
      let set = listeners.get(address);
      if (!set) listeners.set(address, (set = new Set()));
      set.add(listener);
      return () => {
        const s = listeners.get(address);
        if (!s) return;
        s.delete(listener);
        if (s.size === 0) listeners.delete(address);
      };
    },
    async close() {
      listeners.clear();
    },
  };
}
