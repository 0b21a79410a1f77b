// Authentication verdicts (SPF, DKIM, DMARC, ARC) of one stored message, with mailauth. Runs on the
// authentication worker (services/authentication.ts), never on the event loop. Every DNS lookup the
// checks make goes through one resolver per worker (EPHEMAIL_DNS_SERVERS, or the system's): each
// query with a timeout, answers cached (TTL-bounded, size-bounded), and a deadline after which every
// query fails at once, so a whole verdict takes at most its budget (docs/authentication.md).
import { promises as dns } from 'node:dns';
import { authenticate } from 'mailauth';

/** What the checks need that the raw message lacks, recorded at ingest (SMTP session). */
export interface Envelope {
  /** The connecting client's IP address. */
  clientIp: string;
  /** The HELO/EHLO name the client gave. */
  helo: string;
  /** The MAIL FROM address; '' for the null sender `<>`. */
  mailFrom: string;
}

import { domainOf, temperrorVerdict, type Authentication, type AuthResult } from '../domain/authentication.ts';

export type { Authentication, AuthResult } from '../domain/authentication.ts';
export { temperrorVerdict } from '../domain/authentication.ts';

export interface AuthTask {
  envelope: Envelope;
  /** `host` or `host:port` (IPv6 in brackets); empty: the system's resolvers. */
  dnsServers: readonly string[];
  /** The authserv-id of the Authentication-Results value (the service's first domain). */
  authservId: string;
  /** Time budget of the whole verdict. */
  budgetMs: number;
  /** Timeout of one DNS query. */
  queryTimeoutMs: number;
}

/** Cache bounds: answers are kept at most this long (less when the record's TTL says so), this many. */
export const DNS_CACHE = Object.freeze({ maxEntries: 5000, maxTtlMs: 300_000, negativeTtlMs: 60_000, errorTtlMs: 5_000 });
/** The largest TXT answer kept (characters, all strings together); a longer one is not cached. */
const MAX_CACHED_CHARS = 8192;

const RESULTS = new Set<AuthResult>(['pass', 'fail', 'softfail', 'neutral', 'none', 'temperror', 'permerror', 'policy']);
const word = (r: unknown): AuthResult => (typeof r === 'string' && RESULTS.has(r as AuthResult) ? (r as AuthResult) : 'neutral');

type Answer = { ok: true; value: unknown } | { ok: false; code: string; message: string };
interface Cached { until: number; answer: Answer }

/** A resolver for mailauth: resolver(name, rrtype) like dns.promises.resolve, cached, with a timeout. */
export interface CachingResolver {
  resolve(name: string, rrtype: string, deadline: number): Promise<unknown>;
  readonly size: number;
}

const dnsError = (code: string, message: string) => Object.assign(new Error(message), { code });

export function createCachingResolver(servers: readonly string[], queryTimeoutMs: number, now: () => number = Date.now): CachingResolver {
  const resolver = new dns.Resolver({ timeout: queryTimeoutMs, tries: 1 });
  if (servers.length) resolver.setServers([...servers]);
  const cache = new Map<string, Cached>();
  const inflight = new Map<string, Promise<Answer>>();

  const keep = (key: string, answer: Answer, ttlMs: number) => {
    if (answer.ok && JSON.stringify(answer.value).length > MAX_CACHED_CHARS) return;
    cache.delete(key);
    cache.set(key, { until: now() + ttlMs, answer });
    while (cache.size > DNS_CACHE.maxEntries) cache.delete(cache.keys().next().value!);
  };

  const ask = async (name: string, rrtype: string): Promise<Answer> => {
    try {
      if (rrtype === 'A' || rrtype === 'AAAA') {
        const rows = rrtype === 'A' ? await resolver.resolve4(name, { ttl: true }) : await resolver.resolve6(name, { ttl: true });
        const ttl = Math.min(DNS_CACHE.maxTtlMs, ...rows.map((r) => r.ttl * 1000));
        const answer: Answer = { ok: true, value: rows.map((r) => r.address) };
        keep(`${rrtype} ${name}`, answer, ttl);
        return answer;
      }
      const value = await resolver.resolve(name, rrtype);
      const answer: Answer = { ok: true, value };
      keep(`${rrtype} ${name}`, answer, DNS_CACHE.maxTtlMs);
      return answer;
    } catch (err) {
      const code = String((err as { code?: string }).code ?? 'ESERVFAIL');
      const answer: Answer = { ok: false, code, message: String((err as Error).message ?? err) };
      const negative = code === 'ENOTFOUND' || code === 'ENODATA';
      keep(`${rrtype} ${name}`, answer, negative ? DNS_CACHE.negativeTtlMs : DNS_CACHE.errorTtlMs);
      return answer;
    }
  };

  return {
    get size() {
      return cache.size;
    },
    async resolve(name, rrtype, deadline) {
      const key = `${rrtype} ${String(name).toLowerCase()}`;
      const hit = cache.get(key);
      let answer: Answer | undefined = hit && hit.until > now() ? hit.answer : undefined;
      if (!answer) {
        const left = deadline - now();
        if (left <= 0) throw dnsError('ETIMEOUT', `DNS ${rrtype} ${name}: the verdict's time budget is spent`);
        let p = inflight.get(key);
        if (!p) {
          p = ask(name, rrtype).finally(() => inflight.delete(key));
          inflight.set(key, p);
        }
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<Answer>((resolve) => {
          timer = setTimeout(() => resolve({ ok: false, code: 'ETIMEOUT', message: `DNS ${rrtype} ${name}: no answer in time` }), left);
        });
        answer = await Promise.race([p, late]).finally(() => clearTimeout(timer));
      }
      if (!answer.ok) throw dnsError(answer.code, answer.message);
      return answer.value;
    },
  };
}

let shared: { key: string; resolver: CachingResolver } | null = null;
/** The worker's resolver (one cache per worker, shared by every verdict it computes). */
function resolverFor(task: AuthTask): CachingResolver {
  const key = `${task.dnsServers.join(',')}|${task.queryTimeoutMs}`;
  if (shared?.key !== key) shared = { key, resolver: createCachingResolver(task.dnsServers, task.queryTimeoutMs) };
  return shared.resolver;
}

interface MailauthResult {
  spf?: { domain?: string; status?: { result?: string } } | false;
  dkim?: { results?: { signingDomain?: string; selector?: string; status?: { result?: string; comment?: string; aligned?: string | false } }[] };
  dmarc?: { domain?: string; policy?: string; p?: string; status?: { result?: string; header?: { from?: string } } } | false;
  arc?: { status?: { result?: string } } | false;
  headers?: string;
}

/** The Authentication-Results value of mailauth's headers (unfolded to one line). */
function headerValue(headers: string | undefined, authservId: string): string {
  const unfolded = (headers ?? '').replace(/\r?\n[ \t]+/g, ' ');
  for (const line of unfolded.split(/\r?\n/)) {
    if (line.toLowerCase().startsWith('authentication-results:')) return line.slice('authentication-results:'.length).trim();
  }
  return `${authservId}; none`;
}

/** Maps mailauth's result to the wire shape. */
export function verdictOf(r: MailauthResult, task: Pick<AuthTask, 'envelope' | 'authservId'>): Authentication {
  const spf = r.spf || null;
  const spfDomain = domainOf(task.envelope.mailFrom) ?? (task.envelope.helo || null);
  const dkim = (r.dkim?.results ?? [])
    .filter((s) => s.signingDomain) // an unsigned message has one row "none" without a domain
    .map((s) => {
      const row: Authentication['dkim'][number] = {
        result: word(s.status?.result),
        domain: String(s.signingDomain).toLowerCase(),
        selector: String(s.selector ?? ''),
        aligned: !!s.status?.aligned,
      };
      if (s.status?.comment) row.comment = String(s.status.comment);
      return row;
    });
  const dmarc = r.dmarc || null;
  return {
    spf: { result: spf ? word(spf.status?.result) : 'none', domain: spfDomain },
    dkim,
    dmarc: {
      result: dmarc ? word(dmarc.status?.result) : 'none',
      domain: dmarc ? (dmarc.status?.header?.from ?? dmarc.domain ?? null) : null,
      policy: dmarc && (dmarc.p ?? dmarc.policy) ? String(dmarc.p ?? dmarc.policy) : null,
    },
    arc: { result: r.arc ? word(r.arc.status?.result) : 'none' },
    header: headerValue(r.headers, task.authservId),
  };
}

/** DKIM signatures verified per message; more are left out (each may ask for its own body hash). */
export const MAX_SIGNATURES = 10;
/** The header block is looked for in the first this many bytes. */
const HEADER_SCAN_BYTES = 1024 * 1024;

/**
 * The message with at most MAX_SIGNATURES DKIM-Signature fields (the first ones): a message with
 * hundreds, each with its own `l=`, would make as many hashes of the body. One linear pass over the
 * header block; the message is returned as is when it has few.
 */
export function capSignatures(raw: Buffer): Buffer {
  const scan = raw.subarray(0, HEADER_SCAN_BYTES);
  let end = scan.indexOf('\r\n\r\n');
  const lf = scan.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) end = lf;
  if (end < 0) return raw;
  const head = scan.subarray(0, end).toString('latin1');
  const lines = head.split('\n');
  let seen = 0;
  let dropping = false;
  let dropped = false;
  const kept: string[] = [];
  for (const line of lines) {
    const continuation = line.startsWith(' ') || line.startsWith('\t');
    if (!continuation) {
      dropping = false;
      if (line.slice(0, 15).toLowerCase() === 'dkim-signature:' && ++seen > MAX_SIGNATURES) dropping = dropped = true;
    }
    if (!dropping) kept.push(line);
  }
  if (!dropped) return raw;
  return Buffer.concat([Buffer.from(kept.join('\n'), 'latin1'), raw.subarray(end)]);
}

/** The verdicts of one message; never throws (a failure is a temperror verdict). */
export async function authenticateMessage(raw: Uint8Array, task: AuthTask): Promise<Authentication> {
  const started = Date.now();
  const deadline = started + task.budgetMs;
  const dnsResolver = resolverFor(task);
  const { envelope } = task;
  let timer: NodeJS.Timeout | undefined;
  const outOfTime = new Promise<Authentication>((resolve) => {
    // the resolver fails every query after the deadline; this catches what is left (a little later)
    timer = setTimeout(() => resolve(temperrorVerdict(task, 'time budget spent')), task.budgetMs + 250);
  });
  const run = (async () => {
    const result = (await authenticate(capSignatures(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)), {
      ip: envelope.clientIp,
      helo: envelope.helo,
      sender: envelope.mailFrom,
      mta: task.authservId,
      resolver: (name: string, rrtype: string) => dnsResolver.resolve(name, rrtype, deadline),
      disableBimi: true,
      trustReceived: false,
    } as Parameters<typeof authenticate>[1])) as MailauthResult;
    return verdictOf(result, task);
  })().catch((err: unknown) => temperrorVerdict(task, String((err as Error)?.message ?? err).slice(0, 200).replace(/[\r\n;()]/g, ' ')));
  try {
    return await Promise.race([run, outOfTime]);
  } finally {
    clearTimeout(timer);
  }
}
