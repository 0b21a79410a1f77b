// A derivation lane that derives the views of a registry the service was given (registry.ts
// defineRegistry), not the workers' own: apart from the registry, which the lane's tasks load (ops.ts).
import type { Lane } from './pool.ts';
import { registrySource, type StoredView } from './registry.ts';

/**
 * `lane` with every task naming `registry` (when it is not STORED_VIEWS): its workers derive the views
 * of the registry the service was given, not their own. Everything else is the lane's, forwarded
 * (its `max` too: what a scheduler lets run on it at once).
 */
export function registryLane(lane: Lane, registry: readonly StoredView[]): Lane {
  const source = registrySource(registry);
  if (!source) return lane;
  return {
    run: (op, raw, limits, opts = {}) => lane.run(op, raw, limits, { ...opts, options: { ...opts.options, registry: source } }),
    release: (held) => lane.release(held),
    warm: (count) => lane.warm(count),
    close: () => lane.close(),
    get size() {
      return lane.size;
    },
    get max() {
      return lane.max;
    },
  };
}
