// UUIDv7 ids that are strictly increasing in generation order, also within one millisecond
// (RFC 9562 §6.2 method 1: a 42-bit counter in rand_a and the top of rand_b).

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when the string is UUID-shaped (any version); cursors only need to be comparable. */
export const isUuid = (s: string): boolean => UUID_RE.test(s);

const COUNTER_BITS = 42n;
export const COUNTER_MAX = (1n << COUNTER_BITS) - 1n;

/**
 * Formats a UUIDv7 from a millisecond timestamp, a 42-bit counter and 32 random bits.
 * Ids compare (as lowercase strings) in (ms, counter) order.
 */
export function formatUuidV7(ms: number, counter: bigint, random32: number): string {
  const hex = (v: bigint, len: number) => v.toString(16).padStart(len, '0');
  const time = BigInt(ms) & ((1n << 48n) - 1n);
  const randA = (counter >> 30n) & 0xfffn; // 12 bits
  const counterLow = counter & ((1n << 30n) - 1n); // 30 bits
  const randB = (0b10n << 62n) | (counterLow << 32n) | BigInt(random32 >>> 0); // variant + 62 bits
  const t = hex(time, 12);
  const b = hex(randB, 16);
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-7${hex(randA, 3)}-${b.slice(0, 4)}-${b.slice(4, 16)}`;
}

/** Milliseconds since the epoch encoded in a UUIDv7 (or any UUID's first 48 bits). */
export const uuidTimestamp = (id: string): number => parseInt(id.replace(/-/g, '').slice(0, 12), 16);

export interface IdGenerator {
  /** Next id; strictly greater than every id this generator returned before. */
  next(nowMs: number): string;
}

/**
 * A monotonic generator: a new millisecond starts its counter at a random point in the lower
 * half of the counter space; a repeated or earlier millisecond (clock step back) increments it.
 * `random` is injected: a cryptographic source in the service (src/random.ts), a fixed one in tests.
 */
export function createIdGenerator(random: () => number, after?: string): IdGenerator {
  let lastMs = -1;
  let counter = 0n;
  if (after) {
    // continue strictly above an id already issued (a restart after the clock stepped back)
    const hex = after.replace(/-/g, '');
    lastMs = parseInt(hex.slice(0, 12), 16);
    counter = (BigInt('0x' + hex.slice(13, 16)) << 30n) | (BigInt('0x' + hex.slice(16, 24)) & ((1n << 30n) - 1n));
  }
  return {
    next(nowMs: number): string {
      if (nowMs > lastMs) {
        lastMs = nowMs;
        counter = BigInt(Math.floor(random() * 2 ** 30)) << 10n;
      } else {
        counter += 1n;
        if (counter > COUNTER_MAX) {
          lastMs += 1;
          counter = 0n;
        }
      }
      return formatUuidV7(lastMs, counter, Math.floor(random() * 2 ** 32));
    },
  };
}
