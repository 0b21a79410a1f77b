// The platform's randomness for ids, handed to the stores by assemble.ts (domain/ stays pure: it
// takes a random source, it never draws one itself).

/** A uniform number in [0, 1). */
export type RandomSource = () => number;

/**
 * A random source over the platform's cryptographic generator (Web Crypto), drawn 1,024 at a time
 * into a buffer of its own. Ids are as good as an address to whoever knows one, so their random bits
 * must not be predictable from other ids (Math.random's state can be recovered from a few outputs).
 */
export function createSecureRandom(): RandomSource {
  const pool = new Uint32Array(1024);
  let pooled = pool.length;
  return () => {
    if (pooled >= pool.length) {
      globalThis.crypto.getRandomValues(pool);
      pooled = 0;
    }
    return pool[pooled++] / 2 ** 32;
  };
}
