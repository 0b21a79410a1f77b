// The key seam: API keys as the store keeps them (only the SHA-256 of a key is stored; spec:
// Authentication 6). How many keys an IP may mint is the limiter's (limiter.ts `take`), not the
// store's. Backends: sqlite/sqlite-store.ts, redis/redis-store.ts; both pass
// test/conformance/keys.suite.ts. Times are epoch ms, passed in.

export interface KeyRecord {
  /** SHA-256 of the raw key, hex. */
  hash: string;
  prefix: string;
  label: string;
  contactEmail: string | null;
  createdAt: number;
  revokedAt: number | null;
  /** The latest use recorded by touchKey (at most once a minute per node: services/keys.ts), or null. */
  lastUsedAt: number | null;
}

export interface NewKey {
  hash: string;
  prefix: string;
  label: string;
  contactEmail: string | null;
  createdAt: number;
}

export interface KeyStore {
  /** Stores a new key (durably: it is shown once and cannot be recovered). */
  addKey(key: NewKey): Promise<void>;

  /** The key with this hash (revoked or not), or null. */
  findKey(hash: string): Promise<KeyRecord | null>;

  /**
   * `findKey` answered at once when this store holds the answer in memory now (the read cache),
   * else undefined (ask findKey). Optional: a backend without memory has none.
   */
  peekKey?(hash: string): KeyRecord | null | undefined;

  /** Every key, oldest first. */
  listKeys(): Promise<KeyRecord[]>;

  /**
   * Records a use of the key with this hash at `at`: its lastUsedAt becomes `at` unless it is later
   * already. A hash of no key is ignored. Not durable on its own terms (the next use records again).
   */
  touchKey(hash: string, at: number): Promise<void>;

  /** Revokes every not-yet-revoked key whose prefix starts with `prefix`; returns them. */
  revokeKeys(prefix: string, now: number): Promise<KeyRecord[]>;
}
