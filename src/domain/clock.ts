// Time is injected (ARCHITECTURE.md rule 7): services read the clock, never Date.now() directly.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
