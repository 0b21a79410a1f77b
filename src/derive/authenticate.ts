// Authentication verdicts (SPF, DKIM, DMARC, ARC) of one stored message, with mailauth. Runs on the
// authentication worker (services/authentication.ts), never on the event loop. Every DNS lookup the
// checks make goes through one resolver per worker (EPHEMAIL_DNS_SERVERS, or the system's): each
// query with a timeout, answers cached (TTL-bounded, size-bounded), and a deadline after which every
// query fails at once, so a whole verdict takes at most its budget (docs/authentication.md). Each
// verdict counts its lookups: SPF's within RFC 7208's bound (VERDICT_LOOKUPS), no AAAA asked for an
// IPv4 client, so a sender's record never makes the service send more than that per message.
//
// mailauth's four checks are imported from the subpaths its README and its typings document
// (`mailauth/lib/dkim/verify`, `lib/spf`, `lib/dmarc`, `lib/arc`), never its main entry: that one
// loads BIMI's stack (undici, @postalsys/vmc, asn1js, fast-xml-parser: ~10 MB per thread) although
// BIMI is never checked here. authenticateParts() does what the main entry's authenticate() does
// for these four, without BIMI, ARC sealing or trusting Received fields.
import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { arc } from 'mailauth/lib/arc/index.js';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { evaluateDmarc } from 'mailauth/lib/dmarc/index.js';
import { spf } from 'mailauth/lib/spf/index.js';

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
import { unsignedHead } from './head.ts';

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

/**
 * RFC 7208 section 4.6.4: at most 10 terms that query DNS, at most 10 names looked up per `mx` or
 * `ptr` term, at most 2 void lookups. mailauth keeps the first and the third; the address lookups of
 * one `mx` term count once for A and AAAA together there, so a verdict's lookups are counted here too.
 */
export const SPF_LIMITS = Object.freeze({ terms: 10, namesPerTerm: 10, voidLookups: 2 });
/**
 * DNS lookups one verdict may ask for (cached answers included), each check apart so one cannot
 * starve another: SPF's RFC bound (the record, then per term its own query and at most 10 address
 * lookups, and the `exp` explanation: 1 + 10 × 11 + 1) and the other checks' (DKIM: a key per
 * signature, at most MAX_SIGNATURES; DMARC: the policy, its tree walk and the author domain's
 * existence, about 10; ARC: the keys of a chain). A lookup past its bound is not asked: SPF is then
 * `permerror` (as past RFC 7208's limits), the other checks fail as on a DNS error (`temperror`).
 */
export const VERDICT_LOOKUPS = Object.freeze({ spf: 1 + SPF_LIMITS.terms * (1 + SPF_LIMITS.namesPerTerm) + 1, others: 40 });

type Lookup = (name: string, rrtype: string) => Promise<unknown>;

/**
 * The lookups of one check of one verdict: at most `bound` of them, past the deadline none, and for
 * `a`, `mx` and `ptr` only the client's address family (RFC 7208 section 5 compares the client with
 * A records for IPv4, AAAA for IPv6). No check but SPF asks AAAA, so for an IPv4 client an AAAA
 * lookup is answered "no such record" without asking. For an IPv6 client, mailauth's lenient mode
 * asks A and AAAA of the same name together (only to count void lookups); such an A lookup, made in
 * the same turn as the AAAA one, is answered the same way; an A lookup alone (`exists`, DMARC) is
 * asked. Skipped lookups are not counted; `seen` keeps the count (tests).
 */
export function verdictLookups(base: CachingResolver, deadline: number, ipv4Client: boolean, bound: number, seen: { lookups: number } = { lookups: 0 }): Lookup {
  /** IPv6 client: A lookups waiting one turn to see whether an AAAA lookup of the name comes with them. */
  const pairing = new Map<string, { aaaa: boolean }>();
  const notAsked = (rrtype: string, name: string) => dnsError('ENODATA', `DNS ${rrtype} ${name}: not asked (the client's address is of the other family)`);
  return async (name, rrtype) => {
    if (ipv4Client && rrtype === 'AAAA') throw notAsked(rrtype, name);
    if (!ipv4Client && rrtype === 'AAAA') {
      const a = pairing.get(name);
      if (a) a.aaaa = true;
    }
    if (!ipv4Client && rrtype === 'A') {
      const mark = { aaaa: false };
      pairing.set(name, mark);
      await Promise.resolve(); // the AAAA lookup of a pair is asked in the same turn, before this resumes
      if (pairing.get(name) === mark) pairing.delete(name);
      if (mark.aaaa) throw notAsked(rrtype, name);
    }
    if (++seen.lookups > bound) {
      // mailauth's SPF keeps a given spfResult: past the RFC's limits is a permerror (RFC 7208 4.6.4)
      throw Object.assign(dnsError('ELOOKUPLIMIT', `DNS ${rrtype} ${name}: over the ${bound} lookups of a verdict`), {
        spfResult: { error: 'permerror', text: 'Too many DNS requests' },
      });
    }
    return base.resolve(name, rrtype, deadline);
  };
}

/** A client address that is IPv4 (IPv4-mapped IPv6 included, as SPF reads it: RFC 7208 section 5). */
const isIpv4Client = (ip: string) => isIP(ip) === 4 || /^::ffff:(?:\d{1,3}\.){3}\d{1,3}$/i.test(ip) || /^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/i.test(ip);

/** A domain as DMARC compares them: lowercase A-labels without the root dot. */
const domainKey = (d: string) => {
  const lower = String(d).toLowerCase().trim().normalize('NFC');
  return (domainToASCII(lower) || lower).replace(/\.+$/, '');
};
/** RFC 2045 token (an authserv-id that needs no quotes). */
const TOKEN = /^[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+$/;

interface Parts { spf: Lookup; others: Lookup }

/**
 * mailauth's authenticate() for DKIM, SPF, ARC and DMARC (mailauth/lib/mailauth.js, without BIMI,
 * ARC sealing or Received fields): the same calls in the same order, the same result shape.
 */
async function authenticateParts(input: Buffer, envelope: Envelope, authservId: string, lookups: Parts): Promise<MailauthResult> {
  const mta = TOKEN.test(authservId) ? authservId : `"${authservId.replace(/["\\]/g, (c) => `\\${c}`)}"`;
  const dkimResult = (await dkimVerify(input, { resolver: lookups.others, sender: envelope.mailFrom } as Parameters<typeof dkimVerify>[1])) as unknown as {
    results?: { info?: string; signingDomain?: string; id?: string; status: { result?: string; aligned?: string | false; underSized?: number } }[];
    headerFrom?: string[]; fromFields?: number; arc?: unknown;
  };
  const ip = envelope.clientIp;
  let helo = envelope.helo || ip;
  if (helo && isIP(helo)) helo = `[${helo}]`;
  const spfResult = (await spf({ ip, helo, sender: envelope.mailFrom, mta: authservId, resolver: lookups.spf } as Parameters<typeof spf>[0])) as unknown as { info?: string; status: { result?: string }; domain?: string };
  const arcResult = (await arc(dkimResult.arc as Parameters<typeof arc>[0], { resolver: lookups.others, ip } as Parameters<typeof arc>[1])) as unknown as { info?: string; status?: { result?: string } };
  const rows: string[] = [];
  for (const row of dkimResult.results ?? []) if (row.info) rows.push(row.info);
  if (spfResult?.info) rows.push(spfResult.info);
  if (arcResult?.info) rows.push(arcResult.info);
  type Dmarc = Exclude<MailauthResult['dmarc'], false | undefined> & { info?: string; alignment?: { dkim?: { strict?: boolean } } };
  let dmarcResult: Dmarc | false = false;
  if (dkimResult.headerFrom) {
    const passing = (dkimResult.results ?? []).filter((r) => r.status.result === 'pass');
    const evaluated = (await evaluateDmarc({
      headerFrom: dkimResult.headerFrom,
      fromFields: dkimResult.fromFields,
      spfDomains: spfResult?.status?.result === 'pass' && spfResult.domain ? [spfResult.domain] : [],
      dkimDomains: passing.map((r) => ({ id: r.id, domain: r.signingDomain!, aligned: r.status.aligned, underSized: r.status.underSized })),
      arcResult,
      resolver: lookups.others,
    } as Parameters<typeof evaluateDmarc>[0])) as unknown as { response: Dmarc | false; dkimAligned?: Set<string> };
    dmarcResult = evaluated.response || false;
    if (dmarcResult && dmarcResult.info) rows.push(dmarcResult.info);
    if (evaluated.dkimAligned && dmarcResult) {
      // as mailauth does: passing signatures take the DMARC verdict, failing ones the record's alignment mode
      const from = dmarcResult.status?.header?.from ?? '';
      for (const row of dkimResult.results ?? []) {
        if (row.status.result === 'pass') row.status.aligned = evaluated.dkimAligned.has(domainKey(row.signingDomain ?? '')) ? row.signingDomain! : false;
        else if (dmarcResult.alignment?.dkim?.strict) row.status.aligned = row.status.aligned && domainKey(row.signingDomain ?? '') === domainKey(from) ? row.signingDomain! : false;
      }
    }
  }
  return {
    dkim: dkimResult as MailauthResult['dkim'],
    spf: spfResult as MailauthResult['spf'],
    dmarc: dmarcResult,
    arc: (arcResult as MailauthResult['arc']) || false,
    headers: `Authentication-Results: ${mta};\r\n ${rows.join(';\r\n ')}\r\n`,
  };
}

/** The verdicts of one message; never throws (a failure is a temperror verdict). */
export async function authenticateMessage(raw: Uint8Array, task: AuthTask, seen?: { spf: { lookups: number }; others: { lookups: number } }): Promise<Authentication> {
  const started = Date.now();
  const deadline = started + task.budgetMs;
  const dnsResolver = resolverFor(task);
  const { envelope } = task;
  const ipv4 = isIpv4Client(envelope.clientIp);
  const lookups: Parts = {
    spf: verdictLookups(dnsResolver, deadline, ipv4, VERDICT_LOOKUPS.spf, seen?.spf),
    others: verdictLookups(dnsResolver, deadline, ipv4, VERDICT_LOOKUPS.others, seen?.others),
  };
  let timer: NodeJS.Timeout | undefined;
  const outOfTime = new Promise<Authentication>((resolve) => {
    // the resolver fails every query after the deadline; this catches what is left (a little later)
    timer = setTimeout(() => resolve(temperrorVerdict(task, 'time budget spent')), task.budgetMs + 250);
  });
  const run = (async () => {
    // a message that no field hashes the body of: the fields the checks read (ingest cut most such
    // messages already; not those with a header block too long to search on its main thread)
    const unsigned = unsignedHead(raw);
    const input = unsigned ? Buffer.from(unsigned.buffer, unsigned.byteOffset, unsigned.byteLength) : capSignatures(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
    return verdictOf(await authenticateParts(input, envelope, task.authservId, lookups), task);
  })().catch((err: unknown) => temperrorVerdict(task, String((err as Error)?.message ?? err).slice(0, 200).replace(/[\r\n;()]/g, ' ')));
  try {
    return await Promise.race([run, outOfTime]);
  } finally {
    clearTimeout(timer);
  }
}
