// One webhook POST, guarded against SSRF: the host is resolved here, every address it resolves to
// must be public (unless allowed), and the connection goes to the address that was checked (the
// lookup hook of http.request), so a DNS answer that changes between check and connect (rebinding)
// cannot reach an internal address. An IP literal is checked before any connection is made.
// Redirects are not followed; the response body is read up to 64 KiB and dropped.
import { lookup as dnsLookup } from 'node:dns';
import type * as HttpModule from 'node:http';
import type * as HttpsModule from 'node:https';
import type { LookupFunction } from 'node:net';
import { isPublicAddress, parseWebhookUrl, refusedAddressMessage } from '../domain/webhook-url.ts';

// node:http through getBuiltinModule, not an ESM import: importing it as an ES module reads every
// export, and one of them makes Node load its bundled undici (fetch): ~14 MB of RSS at idle that
// nothing here uses (docs/architecture.md "Memory").
const http = process.getBuiltinModule('node:http') as typeof HttpModule;
const https = process.getBuiltinModule('node:https') as typeof HttpsModule;

export interface ResolvedAddress {
  address: string;
  family: number;
}
/** Resolves a host name to all its addresses (dns.lookup by default; tests inject one). */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolve: Resolve = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/** Host-name lookups for webhooks one node runs at once (libuv has 4 threads for dns.lookup, fs and crypto). */
export const LOOKUPS_AT_ONCE = 2;
/** A webhook's host name must resolve within this long (waiting for a free lookup included). */
export const LOOKUP_TIMEOUT_MS = 3000;

/**
 * A resolver for webhooks with bounds of its own: at most `atOnce` lookups run at a time (the rest
 * wait their turn), and a caller gets an answer or an ETIMEOUT error within `timeoutMs`. A lookup
 * that ran out of time keeps its place until it really ends (dns.lookup cannot be cancelled), so a
 * resolver that hangs ties up at most `atOnce` of libuv's threads, never all of them.
 */
export function boundedResolve(resolve: Resolve, atOnce = LOOKUPS_AT_ONCE, timeoutMs = LOOKUP_TIMEOUT_MS): Resolve & { readonly running: number } {
  let running = 0;
  const waiting: (() => void)[] = [];
  const next = () => {
    running--;
    waiting.shift()?.();
  };
  const bounded = (hostname: string) =>
    new Promise<ResolvedAddress[]>((done, fail) => {
      const timer = setTimeout(() => {
        const i = waiting.indexOf(start);
        if (i >= 0) waiting.splice(i, 1); // gave up before its turn: never started
        fail(Object.assign(new Error(`${hostname} did not resolve within ${timeoutMs / 1000} s`), { code: 'ETIMEOUT' }));
      }, timeoutMs);
      const start = () => {
        running++;
        resolve(hostname).then(
          (r) => { clearTimeout(timer); next(); done(r); },
          (e) => { clearTimeout(timer); next(); fail(e); },
        );
      };
      if (running < atOnce) start();
      else waiting.push(start);
    });
  return Object.defineProperty(bounded, 'running', { get: () => running }) as Resolve & { readonly running: number };
}

export interface SendOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  resolve?: Resolve;
  /** Keep-alive connections of the service that sends (createWebhookAgents); Node's global agent without. */
  agents?: WebhookAgents;
}

export interface SendResult {
  /** The receiver's status, or null when no response came. */
  status: number | null;
  /** Why it is not a success (null on 2xx). */
  error: string | null;
  /** Whether nothing was sent because the address is refused. */
  refused: boolean;
}

const BODY_READ_MAX = 64 * 1024;

export interface WebhookAgents {
  http: HttpModule.Agent;
  https: HttpsModule.Agent;
  /** Closes the kept-alive connections (the webhook service's stop). */
  destroy(): void;
}

/** Keep-alive agents for one webhook service: made when it is created, destroyed when it stops. */
export function createWebhookAgents(): WebhookAgents {
  const agents = {
    http: new http.Agent({ keepAlive: true, maxSockets: 256, timeout: 30_000 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 256, timeout: 30_000 }),
  };
  return { ...agents, destroy: () => { agents.http.destroy(); agents.https.destroy(); } };
}

class RefusedAddress extends Error {}

/** Why a host's resolved addresses may not be called (the first one that is not public), or null. */
function refusedAmong(hostname: string, addresses: ResolvedAddress[]): string | null {
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  return bad ? `${hostname} resolves to ${refusedAddressMessage(bad.address)}` : null;
}

/** Checks a URL's host the way a delivery will (for registration): null when it may be called. */
export async function checkDestination(raw: string, allowPrivate: boolean, resolve: Resolve = systemResolve, timeoutMs = 3000): Promise<string | null> {
  const parsed = parseWebhookUrl(raw);
  if (typeof parsed === 'string') return parsed;
  if (allowPrivate) return null;
  if (parsed.literal !== null) return isPublicAddress(parsed.literal) ? null : refusedAddressMessage(parsed.literal);
  let addresses: ResolvedAddress[];
  try {
    addresses = await withTimeout(resolve(parsed.url.hostname), timeoutMs);
  } catch (err) {
    // a name that does not exist is refused; one that cannot be resolved right now (a timeout, a
    // resolver that fails) is kept: every delivery resolves and checks it again
    const code = (err as NodeJS.ErrnoException)?.code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return `${parsed.url.hostname} does not resolve to any address (check the URL's host name)`;
    return null;
  }
  return refusedAmong(parsed.url.hostname, addresses);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timed out')), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}

export function postWebhook(raw: string, headers: Record<string, string>, body: string, options: SendOptions): Promise<SendResult> {
  const parsed = parseWebhookUrl(raw);
  if (typeof parsed === 'string') return Promise.resolve({ status: null, error: parsed, refused: true });
  const { url, literal } = parsed;
  if (literal !== null && !options.allowPrivate && !isPublicAddress(literal)) {
    return Promise.resolve({ status: null, error: refusedAddressMessage(literal), refused: true });
  }
  const resolve = options.resolve ?? systemResolve;
  // node calls this for host names only; each answer is checked, and the connection uses it
  const lookup: LookupFunction = (hostname, opts, cb) => {
    resolve(hostname).then((all) => {
      const refused = options.allowPrivate ? null : refusedAmong(hostname, all);
      if (refused) return cb(new RefusedAddress(refused), '', 4);
      const usable = opts.family === 4 || opts.family === 6 ? all.filter((a) => a.family === opts.family) : all;
      if (usable.length === 0) return cb(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 4);
      if (opts.all) return (cb as unknown as (e: null, a: ResolvedAddress[]) => void)(null, usable);
      cb(null, usable[0].address, usable[0].family);
    }, (err: Error) => cb(err as NodeJS.ErrnoException, '', 4));
  };
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((done) => {
    let settled = false;
    const finish = (r: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      done(r);
    };
    const req = mod.request(url, {
      method: 'POST',
      agent: options.agents?.[url.protocol === 'https:' ? 'https' : 'http'],
      lookup,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'ephemail-webhooks/1' },
    });
    const timer = setTimeout(() => {
      finish({ status: null, error: `no response within ${options.timeoutMs / 1000} s`, refused: false });
      req.destroy();
    }, options.timeoutMs);
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > BODY_READ_MAX) res.destroy();
      });
      const end = () => finish(status >= 200 && status < 300 ? { status, error: null, refused: false } : { status, error: `HTTP ${status}`, refused: false });
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
    });
    req.on('error', (err: Error & { code?: string }) => {
      if (err instanceof RefusedAddress) return finish({ status: null, error: err.message, refused: true });
      finish({ status: null, error: err.code ? `${err.code}: ${err.message}` : err.message, refused: false });
    });
    req.end(body);
  });
}
