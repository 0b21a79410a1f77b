// Time is injected (docs/house-style.md rule 7): services read the clock, never Date.now() directly.
export interface Clock {
  now(): number;
}

/** A time as ISO 8601 UTC, as the spec writes every timestamp. */
export const iso = (ms: number): string => new Date(ms).toISOString();

export const systemClock: Clock = { now: () => Date.now() };
