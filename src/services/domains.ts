// The domains the service serves: EPHEMAIL_DOMAINS (always active, in order, the first the default)
// and those added and retired at run time (kept in the store, so every node and a restart see them).
// One registry per node answers every edge (API, tool endpoint, page, SMTP RCPT) from memory, read
// again from the store every second; the change functions serve the admin API and the CLI alike.
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { normalizeDomain } from '../domain/address.ts';
import type { Clock } from '../domain/clock.ts';
import { AppError, StoreUnavailableError } from '../domain/errors.ts';
import type { DomainRecord, DomainStore } from '../store/domains.ts';

/** Domains that may be active at once besides EPHEMAIL_DOMAINS (each is listed and checked at every RCPT). */
export const MAX_ADDED_ACTIVE = 100;
/** How often a node reads the added domains again: a change made anywhere is served within this and one read. */
export const DOMAIN_REFRESH_MS = 1000;

export type DomainState = 'active' | 'retired';

/** One row of `ephemail domains list` and GET /api/v1/admin/domains. */
export interface DomainEntry {
  domain: string;
  source: 'config' | 'added';
  state: DomainState;
  /** When it was (last) added; null for EPHEMAIL_DOMAINS. */
  addedAt: number | null;
  /** When it was retired; null while active. */
  retiredAt: number | null;
}

/** Config first (as written), then the stored records not shadowed by config (oldest first). */
function entries(config: Config, records: DomainRecord[]): DomainEntry[] {
  const configured = new Set(config.domains);
  return [
    ...config.domains.map((domain): DomainEntry => ({ domain, source: 'config', state: 'active', addedAt: null, retiredAt: null })),
    ...records.filter((r) => !configured.has(r.domain)).map((r): DomainEntry => ({
      domain: r.domain, source: 'added', state: r.retiredAt === null ? 'active' : 'retired', addedAt: r.addedAt, retiredAt: r.retiredAt,
    })),
  ];
}

function parse(raw: string): string {
  const domain = normalizeDomain(raw);
  if (!domain) {
    throw new AppError('invalid_request', `${JSON.stringify(raw.slice(0, 260))} is not a domain name (letters, digits and hyphens in dot-separated labels of at most 63, 253 in all)`, { field: 'domain' });
  }
  return domain;
}

/** Every domain with its source, state and times (config first, then added ones, oldest first). */
export async function listDomains(config: Config, store: DomainStore): Promise<DomainEntry[]> {
  return entries(config, await store.listDomains());
}

/**
 * Adds a domain (or adds a retired one again). `created` is false when it already was active.
 * Refused: a malformed name (invalid_request), a domain of EPHEMAIL_DOMAINS or one past
 * MAX_ADDED_ACTIVE (conflict).
 */
export async function addDomain(config: Config, store: DomainStore, raw: string, now: number): Promise<{ entry: DomainEntry; created: boolean }> {
  const domain = parse(raw);
  if (config.domains.includes(domain)) {
    throw new AppError('conflict', `${domain} is in EPHEMAIL_DOMAINS: it is always served and cannot be added at run time`);
  }
  const r = await store.addDomain(domain, now, MAX_ADDED_ACTIVE);
  if (!r.ok) {
    throw new AppError('conflict', `${r.active} added domains are active already (at most ${MAX_ADDED_ACTIVE}); retire one first`);
  }
  return { entry: entries(config, [r.record]).at(-1)!, created: r.changed };
}

/**
 * Retires an added domain: no new mail or inboxes there, its stored mail readable until it expires.
 * Refused: a malformed name (invalid_request), a domain of EPHEMAIL_DOMAINS (conflict); never added:
 * not_found. Retiring a retired one again changes nothing.
 */
export async function retireDomain(config: Config, store: DomainStore, raw: string, now: number): Promise<DomainEntry> {
  const domain = parse(raw);
  if (config.domains.includes(domain)) {
    throw new AppError('conflict', `${domain} is in EPHEMAIL_DOMAINS and cannot be retired at run time; remove it from EPHEMAIL_DOMAINS and restart every node instead`);
  }
  const record = await store.retireDomain(domain, now);
  if (!record) throw new AppError('not_found', `${domain} was never added (see the list of domains)`);
  return entries(config, [record]).at(-1)!;
}

export interface DomainRegistry {
  /** Active domains: EPHEMAIL_DOMAINS in order (the first is the default), then added ones, oldest first. */
  active(): readonly string[];
  /** The default domain: the first of EPHEMAIL_DOMAINS. */
  readonly defaultDomain: string;
  /**
   * Whether `domain` (lowercase) takes new mail ('active'), only serves its stored mail ('retired'),
   * or is none of this service's (null). Throws StoreUnavailableError for a domain outside
   * EPHEMAIL_DOMAINS while the added ones were never read (the store was down since start).
   */
  stateOf(domain: string): DomainState | null;
  /** Reads the added domains from the store now (also after this node changed one). */
  refresh(): Promise<void>;
  add(raw: string): Promise<{ entry: DomainEntry; created: boolean }>;
  retire(raw: string): Promise<DomainEntry>;
  list(): Promise<DomainEntry[]>;
  /** Starts reading the store every `refreshMs`; stop() ends it. */
  start(): void;
  stop(): void;
}

export interface DomainRegistryDeps {
  config: Config;
  store: DomainStore;
  clock: Clock;
  log: Logger;
  refreshMs?: number;
}

interface Snapshot {
  active: readonly string[];
  state: ReadonlyMap<string, DomainState>;
}

export function createDomainRegistry({ config, store, clock, log, refreshMs = DOMAIN_REFRESH_MS }: DomainRegistryDeps): DomainRegistry {
  const configured = new Set(config.domains);
  const snapshotOf = (records: DomainRecord[]): Snapshot => {
    const state = new Map<string, DomainState>();
    for (const r of records) if (!configured.has(r.domain)) state.set(r.domain, r.retiredAt === null ? 'active' : 'retired');
    for (const d of config.domains) state.set(d, 'active');
    const added = records.filter((r) => r.retiredAt === null && !configured.has(r.domain)).map((r) => r.domain);
    return { active: Object.freeze([...config.domains, ...added]), state };
  };
  let snapshot = snapshotOf([]);
  let loaded = false;
  /** Reads are numbered; an answer older than the one in use is dropped (reads can overlap). */
  let started = 0;
  let applied = 0;
  let failing = false;
  let timer: NodeJS.Timeout | null = null;

  const refresh = async () => {
    const n = ++started;
    try {
      const records = await store.listDomains();
      if (failing) log.info('domains read from the store again');
      failing = false;
      if (n < applied) return;
      applied = n;
      const next = snapshotOf(records);
      if (loaded && next.active.join(',') !== snapshot.active.join(',')) log.info({ domains: next.active }, 'active domains changed');
      snapshot = next;
      loaded = true;
    } catch (err) {
      if (!failing) log.warn({ err: { message: (err as Error).message } }, loaded ? 'domains could not be read from the store; serving the last ones read' : 'domains could not be read from the store; serving EPHEMAIL_DOMAINS only until it answers');
      failing = true;
      throw err;
    }
  };

  /** A change made here is served here at once. */
  const changed = async <T>(result: T): Promise<T> => {
    await refresh().catch(() => undefined);
    return result;
  };

  return {
    active: () => snapshot.active,
    defaultDomain: config.domains[0],
    stateOf(domain) {
      const s = snapshot.state.get(domain);
      if (s) return s;
      if (!loaded) throw new StoreUnavailableError('the domains added at run time have not been read from the store yet');
      return null;
    },
    refresh,
    add: async (raw) => changed(await addDomain(config, store, raw, clock.now())),
    retire: async (raw) => changed(await retireDomain(config, store, raw, clock.now())),
    list: () => listDomains(config, store),
    start() {
      if (timer) return;
      timer = setInterval(() => void refresh().catch(() => undefined), refreshMs);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}
