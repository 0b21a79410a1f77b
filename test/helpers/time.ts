// Time in tests without guessing: wait for a condition the test can observe instead of sleeping for a
// while, and move the service's injected clock instead of waiting for it.
//
// The convention (checked by test/house/sleeps.test.ts): a test waits for what it observes: until()
// on a condition, a node's gauge (test/helpers/metrics.ts), an event (the stream's opening comment, a
// socket's 'close'), or a movable clock. A fixed sleep stays only with a one-line reason on its line
// or the line above, in one of these forms:
//   // quiet window: ...     the test asserts that NOTHING happens in this window
//   // poll: ...             the interval of a loop that waits for an observable (until() itself)
//   // slow on purpose: ...  the delay is the scenario (a slow fake dependency, traffic's pace)
//   // unobservable: ...     nothing outside the code under test shows the state yet (a known debt)
// No test waits for the wall clock to pass a point (a fresh limiter minute, midnight): it moves the
// service's clock (movableClock: freshMinute, toMidday, advance), building the service in this process.
// An elapsed-time assert stays only where the time is the behaviour under test, generous and
// one-sided where it is an upper bound, with `// bound: ...` on its line or the line above.
import type { Clock } from '../../src/domain/clock.ts';

/** Resolves once `cond()` holds (checked every `everyMs`); fails with `what` after `timeoutMs`. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000, everyMs = 5): Promise<void> {
  const t0 = performance.now();
  while (!(await cond())) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, everyMs)); // poll: until() re-checks its condition every `everyMs`
  }
}

/**
 * The CPU time (user and system, ms) this process spends in the synchronous `fn`: a bound on the
 * cost of some work that the machine's other load does not stretch, as it stretches wall time.
 */
export function cpuMs<T>(fn: () => T): { value: T; ms: number } {
  const before = process.cpuUsage();
  const value = fn();
  const used = process.cpuUsage(before);
  return { value, ms: (used.user + used.system) / 1000 };
}

/** A service clock that runs with real time and can be moved forward (`advance`, `freshMinute`, `toMidday`). */
export function movableClock(): Clock & { advance(ms: number): void; freshMinute(): void; toMidday(): void } {
  let offset = 0;
  const now = () => Date.now() + offset;
  return {
    now,
    advance(ms: number) {
      offset += ms;
    },
    /**
     * Moves to the first millisecond of the next minute: the limiter's windows are fixed minutes, so a
     * test that counts requests within one window calls this first and has a whole minute of real time.
     */
    freshMinute() {
      offset += 60_000 - (now() % 60_000);
    },
    /** Moves to the next 12:00:00 UTC: a test of the daily quota is half a day from either of its ends. */
    toMidday() {
      const DAY = 86_400_000;
      offset += (DAY + DAY / 2 - (now() % DAY)) % DAY;
    },
  };
}

/**
 * A service clock that stays in the middle of the current minute, so a burst never straddles a
 * window boundary (the limiter's windows are fixed minutes); it moves on 1 ms per reading, at most 10 s.
 */
export function midMinuteClock(): Clock {
  const start = Math.floor(Date.now() / 60_000) * 60_000 + 20_000;
  let ticks = 0;
  return { now: () => start + Math.min(ticks++, 10_000) };
}

/**
 * midMinuteClock that can also be moved forward (`advance`): a burst stays inside one limiter
 * minute, and `advance(60_000)` is "the sender retries after the minute".
 */
export function movableMidMinuteClock(): Clock & { advance(ms: number): void } {
  const start = Math.floor(Date.now() / 60_000) * 60_000 + 20_000;
  let ticks = 0;
  let offset = 0;
  return {
    now: () => start + offset + Math.min(ticks++, 10_000),
    advance(ms: number) {
      offset += ms;
    },
  };
}
