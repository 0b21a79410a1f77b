// The backends one deployment runs on, chosen in assemble.ts (SQLite) or assemble-redis.ts (Redis).
// A module of its own so that the two composition files do not import each other.
import type { Bus } from './bus/bus.ts';
import type { Limiter } from './limiter/limiter.ts';
import type { Store } from './store/store.ts';
import type { UidStore } from './store/uids.ts';

export interface Backends {
  store: Store;
  bus: Bus;
  limiter: Limiter;
  /** IMAP UIDs (store/uids.ts); absent: numbered in this process's memory. */
  uids?: UidStore;
}
