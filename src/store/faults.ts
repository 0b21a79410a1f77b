// The SMTP-fault seam of the Store: rules an API key sets on one inbox address, which the SMTP
// receiver applies at RCPT TO or at the end of DATA (docs/faults.md). Backends: sqlite/faults.ts,
// redis/faults.ts; both pass test/conformance/faults.suite.ts. Times are epoch ms, passed in.

export type FaultStage = 'rcpt' | 'data';

export interface FaultRule {
  /** `flt_` + random. */
  id: string;
  /** SHA-256 of the owning API key (KeyRecord.hash). */
  keyHash: string;
  /** Lowercase inbox address. */
  address: string;
  stage: FaultStage;
  /** Exactly one of reply, delaySeconds, disconnect is set. `451 4.7.1 Try again later`. */
  reply: string | null;
  delaySeconds: number | null;
  disconnect: boolean;
  /** Uses given at creation; null = until deleted or expired. */
  times: number | null;
  /** Uses left (null when times is null). A rule at 0 no longer applies; it stays listed until it expires or is deleted. */
  remaining: number | null;
  createdAt: number;
  expiresAt: number;
}

export type AddFaultResult = 'ok' | 'address_full' | 'key_full';

/** Which rules the operator's calls (the admin API) name: an address's, a key's, or that key's on that address. */
export type FaultFilter = { address: string; keyHash?: string } | { address?: string; keyHash: string };

export interface FaultStore {
  /**
   * Adds the rule unless its key already has `maxPerAddress` unexpired rules on its address, or
   * `maxPerKey` in all (counted at `now`): one key's rules never keep another key from adding its
   * own. Rules of an address keep the order of their adding.
   */
  addFault(rule: FaultRule, maxPerAddress: number, maxPerKey: number, now: number): Promise<AddFaultResult>;
  /** The address's unexpired rules of this key, in creation order. */
  listFaults(address: string, keyHash: string, now: number): Promise<FaultRule[]>;
  /** Removes the key's rules on the address; returns how many. */
  clearFaults(address: string, keyHash: string): Promise<number>;
  /** Removes one rule of the key on the address; false when there is no such rule. */
  deleteFault(address: string, keyHash: string, id: string): Promise<boolean>;
  /**
   * Unexpired rules by address (every key's), by key (on every address), or both; in creation
   * order. For the operator: revoked keys' rules too, until they are removed or expire.
   */
  findFaults(filter: FaultFilter, now: number): Promise<FaultRule[]>;
  /** Removes the rules `findFaults` would list (expired ones too); returns how many. */
  removeFaults(filter: FaultFilter): Promise<number>;
  /**
   * Uses the first (oldest) unexpired rule of the address for this stage whose `remaining` is not 0,
   * any live key's: its remaining drops by one, atomically across nodes. Rules of a revoked key
   * (KeyStore revokeKeys, however it was called) never apply, from the revocation on. Returns that
   * rule as it was before the use (or null), and whether the address has an unexpired, not used-up
   * `data` rule left after it (the receiver looks at the end of DATA only then). One cheap read
   * when the address has no rule.
   */
  takeFault(address: string, stage: FaultStage, now: number): Promise<{ rule: FaultRule | null; dataRules: boolean }>;
}
