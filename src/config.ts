import { isIP } from 'node:net';
import { parseIpRange } from './domain/ip-ranges.ts';

// The environment, read once into a frozen Config. VARIABLES is the table of every variable (type,
// default, meaning); test/config-table.test.ts holds it, loadConfig and the README's table together.
// docs/contract-decisions.md "Configuration" is the contract for every name and default here.

export interface Limits {
  perMinute: number;
  perDay: number;
}

export interface Config {
  httpHost: string;
  httpPort: number;
  smtpHost: string;
  smtpPort: number;
  /** IMAP listener (docs/imap.md); port null: off. */
  imapHost: string;
  imapPort: number | null;
  /** POP3 listener; port null: off. */
  pop3Host: string;
  pop3Port: number | null;
  /** `{base_url}` without a trailing slash; null means derive from the bound HTTP port. */
  publicUrl: string | null;
  domains: readonly string[];
  store: string;
  emailTtlSeconds: number;
  /**
   * Which direct peers may name the client in X-Forwarded-For: none (false), loopback and private
   * networks (`true`), or a list of addresses and CIDR blocks. One hop is trusted either way.
   */
  trustProxy: false | readonly string[];
  maxMessageBytes: number;
  /** Bytes of DATA all SMTP sessions together may hold in memory at once; above it new DATA gets 452. */
  maxInflightBytes: number;
  /** Bytes of answers the read model keeps (services/answers.ts). */
  answerCacheBytes: number;
  anon: Limits;
  key: Limits & { concurrentWaits: number };
  keysPerIpPerDay: number;
  /** Long-polls one node holds at once, HTTP and MCP together; more get too_many_waiters. */
  maxHeldWaits: number;
  /** Replicas that must acknowledge each write a 250, a key or a webhook depends on (Redis WAIT); 0: none. */
  redisMinReplicas: number;
  /** GET /metrics (Prometheus text) on; EPHEMAIL_METRICS=false switches it off. */
  metrics: boolean;
  /**
   * Webhooks: whether loopback/private/link-local receivers are allowed, whether any key may watch a
   * whole domain (`*@<domain>`), how many per key, deliveries one node runs at once.
   */
  webhooks: { allowPrivate: boolean; wildcard: boolean; perKey: number; maxInFlight: number };
  /** SMTP AUTH: not offered (default), or offered and any credentials accepted (apps that insist on logging in). */
  smtpAuth: 'off' | 'accept-any';
  /** STARTTLS: off (default), a certificate made at start, or the operator's PEM files. */
  smtpTls: { mode: 'off' } | { mode: 'self-signed' } | { mode: 'files'; certFile: string; keyFile: string };
  /**
   * Peers (addresses and CIDR blocks) whose SMTP connections start with a PROXY protocol v1/v2
   * header naming the client; empty: no PROXY protocol (docs/deploy.md).
   */
  smtpProxyProtocol: readonly string[];
  /** Inbound SMTP caps per minute, 0 = off: transactions per client IP (IPv6 /64), messages per recipient address. */
  smtpCaps: { perIpPerMinute: number; perAddressPerMinute: number };
  logLevel: string;
  /** Secret used to sign MCP session ids; random per process unless set (set it when running several nodes). */
  sessionSecret: string | null;
  /** The admin API's bearer token (/api/v1/admin/); null: the admin API is off (every path 404). */
  adminToken: string | null;
  /** A SpamAssassin spamd to score mail with (docs/sender-checks.md); null: no spam scores (`spam: null`). */
  spamd: { host: string; port: number } | null;
  /** Largest attachment kept, in decoded bytes (spec: 5 MB). */
  maxAttachmentBytes: number;
  maxAttachments: number;
  /** DNS servers of the authentication checks (`host` or `host:port`, IPv6 in brackets); empty: the system's. */
  dnsServers: readonly string[];
}

/** One row of the configuration table: the README's "Configuration" table is checked against it. */
export interface Variable {
  name: string;
  type: 'integer' | 'boolean' | 'string' | 'list' | 'url' | 'secret' | 'path';
  /** The default as the README shows it. */
  default: string;
  meaning: string;
  /** Where loadConfig({}) puts it (checked against `default`), when the default is a plain value. */
  of?: (c: Config) => unknown;
}

export const VARIABLES: readonly Variable[] = Object.freeze([
  { name: 'EPHEMAIL_HTTP_HOST', type: 'string', default: '127.0.0.1', meaning: 'HTTP bind address', of: (c) => c.httpHost },
  { name: 'EPHEMAIL_HTTP_PORT', type: 'integer', default: '8025', meaning: 'HTTP port (0: any free port)', of: (c) => c.httpPort },
  { name: 'EPHEMAIL_SMTP_HOST', type: 'string', default: '127.0.0.1', meaning: 'SMTP bind address', of: (c) => c.smtpHost },
  { name: 'EPHEMAIL_SMTP_PORT', type: 'integer', default: '1025', meaning: 'SMTP port (0: any free port)', of: (c) => c.smtpPort },
  { name: 'EPHEMAIL_IMAP_HOST', type: 'string', default: '127.0.0.1', meaning: 'IMAP bind address', of: (c) => c.imapHost },
  { name: 'EPHEMAIL_IMAP_PORT', type: 'integer', default: '1143', meaning: 'IMAP port (0: any free port; off: no IMAP listener)', of: (c) => c.imapPort },
  { name: 'EPHEMAIL_POP3_HOST', type: 'string', default: '127.0.0.1', meaning: 'POP3 bind address', of: (c) => c.pop3Host },
  { name: 'EPHEMAIL_POP3_PORT', type: 'integer', default: '1110', meaning: 'POP3 port (0: any free port; off: no POP3 listener)', of: (c) => c.pop3Port },
  { name: 'EPHEMAIL_PUBLIC_URL', type: 'url', default: 'http://localhost:<http port>', meaning: '{base_url} of links' },
  { name: 'EPHEMAIL_DOMAINS', type: 'list', default: 'ephemail.test', meaning: 'active domains, the first is the default', of: (c) => c.domains.join(',') },
  { name: 'EPHEMAIL_STORE', type: 'string', default: 'sqlite:./data/ephemail.db', meaning: 'sqlite:<path>, sqlite::memory:, redis://…, redis+cluster://…', of: (c) => c.store },
  { name: 'EPHEMAIL_EMAIL_TTL_SECONDS', type: 'integer', default: '3600', meaning: 'email lifetime', of: (c) => c.emailTtlSeconds },
  { name: 'EPHEMAIL_TRUST_PROXY', type: 'list', default: 'false', meaning: 'direct peers trusted to name the client in X-Forwarded-For', of: (c) => c.trustProxy },
  { name: 'EPHEMAIL_MAX_MESSAGE_BYTES', type: 'integer', default: '31457280', meaning: 'whole-message limit (SMTP SIZE)', of: (c) => c.maxMessageBytes },
  { name: 'EPHEMAIL_MAX_INFLIGHT_BYTES', type: 'integer', default: '536870912', meaning: 'DATA bytes all SMTP sessions may hold at once', of: (c) => c.maxInflightBytes },
  { name: 'EPHEMAIL_ANSWER_CACHE_BYTES', type: 'integer', default: '16777216', meaning: 'bytes of email answers the read model keeps in memory', of: (c) => c.answerCacheBytes },
  { name: 'EPHEMAIL_LIMIT_ANON_PER_MINUTE', type: 'integer', default: '60', meaning: 'anonymous requests per IP per minute', of: (c) => c.anon.perMinute },
  { name: 'EPHEMAIL_LIMIT_ANON_PER_DAY', type: 'integer', default: '1000', meaning: 'anonymous requests per IP per day', of: (c) => c.anon.perDay },
  { name: 'EPHEMAIL_LIMIT_KEY_PER_MINUTE', type: 'integer', default: '300', meaning: 'requests per key per minute', of: (c) => c.key.perMinute },
  { name: 'EPHEMAIL_LIMIT_KEY_PER_DAY', type: 'integer', default: '10000', meaning: 'requests per key per day', of: (c) => c.key.perDay },
  { name: 'EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS', type: 'integer', default: '5', meaning: 'long-polls and streams a key holds at once', of: (c) => c.key.concurrentWaits },
  { name: 'EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY', type: 'integer', default: '3', meaning: 'keys one IP may create per 24 hours', of: (c) => c.keysPerIpPerDay },
  { name: 'EPHEMAIL_MAX_HELD_WAITS', type: 'integer', default: '10000', meaning: 'long-polls one node holds at once', of: (c) => c.maxHeldWaits },
  { name: 'EPHEMAIL_REDIS_MIN_REPLICAS', type: 'integer', default: '0', meaning: 'Redis replicas that must acknowledge a write before a 250 (WAIT); fewer in time: 451', of: (c) => c.redisMinReplicas },
  { name: 'EPHEMAIL_LOG_LEVEL', type: 'string', default: 'info', meaning: 'pino level', of: (c) => c.logLevel },
  { name: 'EPHEMAIL_SMTP_AUTH', type: 'string', default: 'off', meaning: 'off, or accept-any', of: (c) => c.smtpAuth },
  { name: 'EPHEMAIL_SMTP_TLS', type: 'string', default: 'off', meaning: 'off, or self-signed', of: (c) => c.smtpTls.mode },
  { name: 'EPHEMAIL_SMTP_TLS_CERT', type: 'path', default: 'unset', meaning: 'PEM certificate for STARTTLS' },
  { name: 'EPHEMAIL_SMTP_TLS_KEY', type: 'path', default: 'unset', meaning: 'PEM key for STARTTLS' },
  { name: 'EPHEMAIL_SMTP_PROXY_PROTOCOL', type: 'list', default: 'unset', meaning: 'balancers (addresses, CIDR blocks) that send a PROXY protocol header' },
  { name: 'EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE', type: 'integer', default: '0', meaning: 'SMTP transactions per client IP per minute (0: off)', of: (c) => c.smtpCaps.perIpPerMinute },
  { name: 'EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE', type: 'integer', default: '0', meaning: 'messages per recipient address per minute (0: off)', of: (c) => c.smtpCaps.perAddressPerMinute },
  { name: 'EPHEMAIL_METRICS', type: 'boolean', default: 'true', meaning: 'GET /metrics on', of: (c) => c.metrics },
  { name: 'EPHEMAIL_WEBHOOK_ALLOW_PRIVATE', type: 'boolean', default: 'false', meaning: 'webhooks may call private addresses', of: (c) => c.webhooks.allowPrivate },
  { name: 'EPHEMAIL_WEBHOOK_WILDCARD', type: 'boolean', default: 'false', meaning: 'keys may register *@<domain> webhooks (only where all mail on these domains is yours)', of: (c) => c.webhooks.wildcard },
  { name: 'EPHEMAIL_WEBHOOKS_PER_KEY', type: 'integer', default: '10', meaning: 'webhooks per key', of: (c) => c.webhooks.perKey },
  { name: 'EPHEMAIL_WEBHOOK_MAX_IN_FLIGHT', type: 'integer', default: '64', meaning: 'webhook deliveries one node runs at once', of: (c) => c.webhooks.maxInFlight },
  { name: 'EPHEMAIL_SESSION_SECRET', type: 'secret', default: 'random per process', meaning: 'signs MCP session ids (at least 32 bytes)' },
  { name: 'EPHEMAIL_DNS_SERVERS', type: 'list', default: 'the system\'s resolvers', meaning: 'DNS servers (host or host:port, IPv6 in brackets) of the SPF/DKIM/DMARC checks' },
  { name: 'EPHEMAIL_ADMIN_TOKEN', type: 'secret', default: 'unset', meaning: 'turns the admin API on; its bearer token (at least 32 characters)' },
  { name: 'EPHEMAIL_SPAMD', type: 'string', default: 'unset', meaning: 'host:port of a SpamAssassin spamd: the full email gets a spam score' },
]);

/** The store setting without credentials, for logs and the banner. */
export const redactStoreUrl = (store: string) => store.replace(/^([a-z+]+:\/\/)[^@/]*@/i, '$1***@');

export class ConfigError extends Error {
  constructor(variable: string, value: string, expected: string) {
    super(`${variable}=${JSON.stringify(value)} is not valid: expected ${expected}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, raw, `an integer from ${min} to ${max}`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(name, raw, `an integer from ${min} to ${max}`);
  return n;
}

/** A port, or null for `off` (no listener). */
function port(env: Env, name: string, def: number): number | null {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === 'off') return null;
  if (raw !== undefined && raw !== '' && !/^\d+$/.test(raw)) throw new ConfigError(name, raw, 'a port from 0 to 65535 (0: any free port), or off');
  return int(env, name, def, 0, 65535);
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, raw, 'true or false');
}

/** `EPHEMAIL_TRUST_PROXY=true`: proxies on this host or a private network (a load balancer in front). */
export const PRIVATE_PROXY_RANGES = Object.freeze(['127.0.0.0/8', '::1/128', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7', 'fe80::/10']);

function trustProxy(env: Env): false | readonly string[] {
  const raw = env.EPHEMAIL_TRUST_PROXY?.trim() ?? '';
  const v = raw.toLowerCase();
  if (['', '0', 'false', 'no', 'off'].includes(v)) return false;
  if (['1', 'true', 'yes', 'on'].includes(v)) return PRIVATE_PROXY_RANGES;
  const list = raw.split(',').map((x) => x.trim()).filter(Boolean);
  const expected = 'false, true (loopback and private networks) or a comma-separated list of proxy IP addresses and CIDR blocks';
  if (!list.every(isIpRange)) throw new ConfigError('EPHEMAIL_TRUST_PROXY', raw, expected);
  return Object.freeze(list);
}

/** EPHEMAIL_SMTP_PROXY_PROTOCOL: the balancers' addresses and CIDR blocks (one or more), or unset. */
function smtpProxyProtocol(env: Env): readonly string[] {
  const raw = env.EPHEMAIL_SMTP_PROXY_PROTOCOL?.trim() ?? '';
  if (raw === '') return Object.freeze([]);
  const list = raw.split(',').map((x) => x.trim()).filter(Boolean);
  const expected = 'a comma-separated list of the balancers\' IP addresses and CIDR blocks (e.g. 10.0.0.0/8,fd00::/8)';
  if (list.length === 0 || !list.every(isIpRange)) throw new ConfigError('EPHEMAIL_SMTP_PROXY_PROTOCOL', raw, expected);
  return Object.freeze(list);
}

/** EPHEMAIL_DNS_SERVERS: IP addresses, each with an optional port (IPv6 in brackets), or unset. */
function dnsServers(env: Env): readonly string[] {
  const raw = env.EPHEMAIL_DNS_SERVERS?.trim() ?? '';
  if (raw === '') return Object.freeze([]);
  const list = raw.split(',').map((x) => x.trim()).filter(Boolean);
  const valid = (s: string) => {
    const m = /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(s) ?? /^([0-9.]+)(?::(\d{1,5}))?$/.exec(s);
    if (!m) return isIP(s) === 6; // a bare IPv6 address (no port)
    const port = m[2] === undefined ? 53 : Number(m[2]);
    return isIP(m[1]) !== 0 && (s.startsWith('[') ? isIP(m[1]) === 6 : isIP(m[1]) === 4) && port >= 1 && port <= 65535;
  };
  if (list.length === 0 || !list.every(valid)) {
    throw new ConfigError('EPHEMAIL_DNS_SERVERS', raw, 'a comma-separated list of DNS server addresses, each host or host:port, IPv6 in brackets (e.g. 127.0.0.1:5353,[::1]:53)');
  }
  return Object.freeze(list);
}

/** An address or CIDR block as the matchers read it (domain/ip-ranges.ts). */
const isIpRange = (entry: string) => parseIpRange(entry) !== null;

function smtpAuth(env: Env): Config['smtpAuth'] {
  const v = env.EPHEMAIL_SMTP_AUTH?.trim().toLowerCase() || 'off';
  if (v !== 'off' && v !== 'accept-any') throw new ConfigError('EPHEMAIL_SMTP_AUTH', v, 'off or accept-any');
  return v;
}

function smtpTls(env: Env): Config['smtpTls'] {
  const mode = env.EPHEMAIL_SMTP_TLS?.trim().toLowerCase() || '';
  const certFile = env.EPHEMAIL_SMTP_TLS_CERT?.trim() || '';
  const keyFile = env.EPHEMAIL_SMTP_TLS_KEY?.trim() || '';
  if (certFile || keyFile) {
    if (!certFile || !keyFile) throw new ConfigError(certFile ? 'EPHEMAIL_SMTP_TLS_KEY' : 'EPHEMAIL_SMTP_TLS_CERT', '', 'a PEM file path (set both EPHEMAIL_SMTP_TLS_CERT and EPHEMAIL_SMTP_TLS_KEY)');
    return { mode: 'files', certFile, keyFile };
  }
  if (mode === '' || mode === 'off') return { mode: 'off' };
  if (mode === 'self-signed') return { mode: 'self-signed' };
  throw new ConfigError('EPHEMAIL_SMTP_TLS', mode, 'off or self-signed (or set EPHEMAIL_SMTP_TLS_CERT and EPHEMAIL_SMTP_TLS_KEY)');
}

/** The MCP session secret: at least 32 bytes, or none (a random one per process). */
function sessionSecret(env: Env): string | null {
  const v = env.EPHEMAIL_SESSION_SECRET?.trim();
  if (!v) return null;
  if (Buffer.byteLength(v, 'utf8') < 32) throw new ConfigError('EPHEMAIL_SESSION_SECRET', '(hidden)', 'at least 32 bytes (e.g. openssl rand -hex 32)');
  return v;
}

/** The admin token: at least 32 characters, or none (the admin API is off). */
/** EPHEMAIL_SPAMD: `host:port` (an IPv6 address in brackets), or unset. */
function spamd(env: Env): { host: string; port: number } | null {
  const raw = env.EPHEMAIL_SPAMD?.trim();
  if (!raw) return null;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(raw);
  const port = m ? Number(m[3]) : 0;
  if (!m || port < 1 || port > 65535) throw new ConfigError('EPHEMAIL_SPAMD', raw, 'host:port of a spamd ([ipv6]:port for IPv6), or unset');
  return { host: m[1] ?? m[2], port };
}

function adminToken(env: Env): string | null {
  const v = env.EPHEMAIL_ADMIN_TOKEN?.trim();
  if (!v) return null;
  if ([...v].length < 32 || /\s/.test(v)) throw new ConfigError('EPHEMAIL_ADMIN_TOKEN', '(hidden)', 'at least 32 characters without spaces (e.g. openssl rand -hex 32), or unset to keep the admin API off');
  return v;
}

const DOMAIN_RE = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

export function loadConfig(env: Env = process.env): Config {
  const domainsRaw = env.EPHEMAIL_DOMAINS?.trim() || 'ephemail.test';
  const domains = [...new Set(domainsRaw.split(',').map((d) => d.trim().toLowerCase()).filter(Boolean))];
  if (domains.length === 0 || !domains.every((d) => DOMAIN_RE.test(d))) {
    throw new ConfigError('EPHEMAIL_DOMAINS', domainsRaw, 'comma-separated domain names');
  }
  let publicUrl: string | null = null;
  const pu = env.EPHEMAIL_PUBLIC_URL?.trim();
  if (pu) {
    let u: URL;
    try {
      u = new URL(pu);
    } catch {
      throw new ConfigError('EPHEMAIL_PUBLIC_URL', pu, 'an absolute http(s) URL');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError('EPHEMAIL_PUBLIC_URL', pu, 'an absolute http(s) URL');
    publicUrl = pu.replace(/\/+$/, '');
  }
  const store = env.EPHEMAIL_STORE?.trim() || 'sqlite:./data/ephemail.db';
  if (!/^(sqlite:.+|redis:\/\/.+|rediss:\/\/.+|redis\+cluster:\/\/.+)$/.test(store)) {
    throw new ConfigError('EPHEMAIL_STORE', store, 'sqlite:<path>, sqlite::memory:, redis://host:port[/db] or redis+cluster://h1:p1,h2:p2');
  }
  const logLevel = env.EPHEMAIL_LOG_LEVEL?.trim() || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('EPHEMAIL_LOG_LEVEL', logLevel, 'a pino level (fatal, error, warn, info, debug, trace, silent)');
  }
  const host = (name: string) => {
    const v = env[name]?.trim() || '127.0.0.1';
    if (/\s/.test(v)) throw new ConfigError(name, v, 'a host name or IP address');
    return v;
  };
  return Object.freeze({
    httpHost: host('EPHEMAIL_HTTP_HOST'),
    httpPort: int(env, 'EPHEMAIL_HTTP_PORT', 8025, 0, 65535),
    smtpHost: host('EPHEMAIL_SMTP_HOST'),
    smtpPort: int(env, 'EPHEMAIL_SMTP_PORT', 1025, 0, 65535),
    imapHost: host('EPHEMAIL_IMAP_HOST'),
    imapPort: port(env, 'EPHEMAIL_IMAP_PORT', 1143),
    pop3Host: host('EPHEMAIL_POP3_HOST'),
    pop3Port: port(env, 'EPHEMAIL_POP3_PORT', 1110),
    publicUrl,
    domains: Object.freeze(domains),
    store,
    emailTtlSeconds: int(env, 'EPHEMAIL_EMAIL_TTL_SECONDS', 3600, 1),
    trustProxy: trustProxy(env),
    maxMessageBytes: int(env, 'EPHEMAIL_MAX_MESSAGE_BYTES', 31457280, 1024),
    maxInflightBytes: int(env, 'EPHEMAIL_MAX_INFLIGHT_BYTES', 512 * 1024 * 1024, 1024),
    answerCacheBytes: int(env, 'EPHEMAIL_ANSWER_CACHE_BYTES', 16 * 1024 * 1024, 0),
    anon: Object.freeze({
      perMinute: int(env, 'EPHEMAIL_LIMIT_ANON_PER_MINUTE', 60, 1),
      perDay: int(env, 'EPHEMAIL_LIMIT_ANON_PER_DAY', 1000, 1),
    }),
    key: Object.freeze({
      perMinute: int(env, 'EPHEMAIL_LIMIT_KEY_PER_MINUTE', 300, 1),
      perDay: int(env, 'EPHEMAIL_LIMIT_KEY_PER_DAY', 10000, 1),
      concurrentWaits: int(env, 'EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS', 5, 0),
    }),
    keysPerIpPerDay: int(env, 'EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY', 3, 0),
    maxHeldWaits: int(env, 'EPHEMAIL_MAX_HELD_WAITS', 10_000, 0),
    redisMinReplicas: int(env, 'EPHEMAIL_REDIS_MIN_REPLICAS', 0, 0, 16),
    metrics: bool(env, 'EPHEMAIL_METRICS', true),
    webhooks: {
      allowPrivate: bool(env, 'EPHEMAIL_WEBHOOK_ALLOW_PRIVATE', false),
      wildcard: bool(env, 'EPHEMAIL_WEBHOOK_WILDCARD', false),
      perKey: int(env, 'EPHEMAIL_WEBHOOKS_PER_KEY', 10, 0),
      maxInFlight: int(env, 'EPHEMAIL_WEBHOOK_MAX_IN_FLIGHT', 64, 1),
    },
    smtpAuth: smtpAuth(env),
    smtpTls: smtpTls(env),
    smtpProxyProtocol: smtpProxyProtocol(env),
    smtpCaps: Object.freeze({
      perIpPerMinute: int(env, 'EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE', 0, 0),
      perAddressPerMinute: int(env, 'EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE', 0, 0),
    }),
    logLevel,
    sessionSecret: sessionSecret(env),
    adminToken: adminToken(env),
    spamd: spamd(env),
    maxAttachmentBytes: 5 * 1024 * 1024,
    maxAttachments: 100,
    dnsServers: dnsServers(env),
  });
}
