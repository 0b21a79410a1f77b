// What every registry entry has (registry.ts), in a file of its own so that an entry kept apart from
// the registry (authentication-view.ts, loaded alone by the verdicts' worker) needs no import of it.
export interface Entry<K extends string> {
  name: K;
  /** Bump when `derive` changes what it gives: views kept by an older version are derived again. */
  version: number;
  /** Milliseconds; null: the derivation's own budget (by message size). */
  budget: number | null;
}
