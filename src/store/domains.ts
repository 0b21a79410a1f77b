// The domain seam of the Store: domains added and retired at run time (EPHEMAIL_DOMAINS are never
// stored; services/domains.ts puts the two together). Backends: sqlite/domains.ts, redis/domains.ts;
// both pass test/conformance/domains.suite.ts. Times are epoch ms, passed in.

export interface DomainRecord {
  /** Lowercase domain name, as services/domains.ts validated it. */
  domain: string;
  /** When it was added, or added again after being retired (the latest time). */
  addedAt: number;
  /** When it was retired; null while it is active. */
  retiredAt: number | null;
}

export type AddDomainResult =
  /** `changed`: it was new or retired and is active now; false: it already was active (untouched). */
  | { ok: true; record: DomainRecord; changed: boolean }
  /** Refused: `maxActive` domains are active already (nothing written). */
  | { ok: false; active: number };

export interface DomainStore {
  /** Every domain ever added, active and retired, oldest `addedAt` first (ties by name). */
  listDomains(): Promise<DomainRecord[]>;

  /**
   * Makes `domain` active: a new one gets `addedAt = now`; a retired one is active again with
   * `addedAt = now`, `retiredAt = null`; an active one is returned unchanged. Atomic with the count:
   * when `maxActive` domains are active already and this one is not among them, nothing is written.
   */
  addDomain(domain: string, now: number, maxActive: number): Promise<AddDomainResult>;

  /**
   * Retires an active domain (`retiredAt = now`); a retired one is returned unchanged (its first
   * `retiredAt` stays). Null when the domain was never added.
   */
  retireDomain(domain: string, now: number): Promise<DomainRecord | null>;
}
