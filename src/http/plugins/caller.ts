// Who pays for a request: resolves the caller (anonymous per IP, an API key with no silent downgrade,
// or the web pages' own requests: web-caller.ts), counts the request in its bucket, and sets
// ratelimit-* headers on every /api/v1 response.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Limits } from '../../config.ts';
import { AppError } from '../../domain/errors.ts';
import { ipBucket } from '../../domain/limits.ts';
import { hitClient, limitHeaders, type LimitResult } from '../../limiter/limiter.ts';
import type { Core } from '../../services/core.ts';
import { authenticate, keyHasher, keyUseRecorder } from '../../services/keys.ts';
import type { KeyRecord } from '../../store/keys.ts';
import { WEB_LIMITS, isPageRequest } from './web-caller.ts';

export interface Caller {
  /** `web`: the inbox pages' own requests, in the IP's web bucket (web-caller.ts); never seen by /me. */
  kind: 'anonymous' | 'key' | 'web';
  key: KeyRecord | null;
  bucket: string;
  limits: Limits;
  concurrentWaits: number;
  /** An anonymous caller's IP: it also counts in its IPv6 /56 and /48 (limiter.ts hitClient). */
  ip?: string;
  /** The bucket state after this request (for headers and /me). */
  usage?: LimitResult;
}

/** How a route relates to the quota (spec: Limits): counted, or only reported. */
export type QuotaMode = 'count' | 'peek';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
  interface FastifyContextConfig {
    quota?: QuotaMode;
  }
}

/**
 * Whether a request is an API request, decided by the route it matched (however its path was
 * spelled: `/%61pi/v1/domains` is routed to `/api/v1/domains` and pays like it), and for a path that
 * matched nothing by its decoded, case-folded first segment (an unknown `/API/…` still counts).
 */
export function isApiRequest(request: FastifyRequest): boolean {
  // the common spelling needs no look at the route (request.routeOptions builds an object per read)
  if (request.url.startsWith('/api/')) return true;
  const route = request.routeOptions.url;
  if (route !== undefined) return route.startsWith('/api/');
  const path = request.url.split('?', 1)[0];
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // not valid percent-encoding: judged as written
  }
  return /^\/+api(?:[/;]|$)/i.test(decoded);
}

/** The segment after /api/v1/ when written without a percent sign (none: it may spell anything). */
const FIRST_SEGMENT_RE = /^\/api\/v1\/([^/?;%]*)(?=[/?;]|$)/;

/** The admin API's paths (http/routes/admin.ts), matched or not, however spelled. */
const ADMIN_PATH_RE = /^\/+api\/v1\/admin(?:[/;]|$)/i;

/**
 * Whether a request is for the admin API: by the route it matched, and for a path that matched
 * nothing (the admin API off, or a path it does not have) by its decoded path. Cheap for every
 * other request: a URL without "admin" or a percent sign is none.
 */
export function isAdminRequest(request: FastifyRequest): boolean {
  const url = request.url;
  if (!/admin|%/i.test(url)) return false;
  // the common spelling, /api/v1/<segment>…, with a plain segment that is not "admin": neither a
  // route nor the decoded path can be the admin API (an address's %40 further on needs no look at
  // the route, which builds an object per read)
  if (url.startsWith('/api/v1/')) {
    const segment = FIRST_SEGMENT_RE.exec(url);
    if (segment !== null && !(segment[1].length === 5 && segment[1].toLowerCase() === 'admin')) return false;
  }
  const route = request.routeOptions.url;
  if (route !== undefined) return route.startsWith('/api/v1/admin/');
  const path = request.url.split('?', 1)[0];
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // not valid percent-encoding: judged as written
  }
  return ADMIN_PATH_RE.test(decoded);
}

/** The raw key a request carries, from `Authorization: Bearer` or `X-API-Key`; undefined when none. */
export function presentedKey(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization;
  const xKey = request.headers['x-api-key'];
  const x = Array.isArray(xKey) ? xKey[0] : xKey;
  let bearer: string | undefined;
  if (auth !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (!m) throw new AppError('unauthorized', 'The Authorization header must be "Bearer <API_KEY>"');
    bearer = m[1];
  }
  if (bearer !== undefined && x !== undefined && bearer !== x.trim()) {
    throw new AppError('unauthorized', 'Authorization and X-API-Key carry different keys; send one');
  }
  return bearer ?? x;
}

export function setLimitHeaders(reply: FastifyReply, r: LimitResult): void {
  const h = limitHeaders(r);
  // one call per header (what reply.headers(h) does, without walking the object)
  reply.header('ratelimit-limit', h['ratelimit-limit']);
  reply.header('ratelimit-remaining', h['ratelimit-remaining']);
  reply.header('ratelimit-reset', h['ratelimit-reset']);
}

/**
 * Callback-style, with one promise per awaited step and nothing else allocated for the common case:
 * this hook runs on every request, and an async function's extra promises showed in the API profile.
 */
export function registerCaller(app: FastifyInstance, core: Core): void {
  app.decorateRequest('caller', null as unknown as Caller);

  const recordUse = keyUseRecorder(core.keys, core.log);
  const hash = keyHasher();
  // a key's bucket name, kept per record (the read cache hands out one kept record while it holds
  // it): the limiter looks up the same string, not a new one per request
  const buckets = new WeakMap<KeyRecord, string>();
  const bucketOf = (key: KeyRecord) => {
    let bucket = buckets.get(key);
    if (bucket === undefined) buckets.set(key, (bucket = `key:${key.hash}`));
    return bucket;
  };
  const keyCaller = (key: KeyRecord): Caller => ({ kind: 'key', key, bucket: bucketOf(key), limits: core.config.key, concurrentWaits: core.config.key.concurrentWaits });

  const reject = (caller: Caller, result: LimitResult): AppError => {
    // which refusal (minute or day) and when to retry: the limiter's one rule (limitResult)
    const reason = result.reason ?? 'rate_limited';
    const retryAfter = result.retryAfterSeconds;
    // a person on the page is told when to try again, not how to mint a key
    if (caller.kind === 'web') return new AppError(reason, `Too many actions from your network for now; try again in ${retryAfter} s.`, { retryAfter });
    const msg = reason === 'quota_exceeded'
      ? `Daily quota of ${caller.limits.perDay} requests used up; it resets at 00:00 UTC${caller.kind === 'anonymous' ? '. A free API key (POST /api/v1/keys) has a larger quota' : ''}`
      : `More than ${caller.limits.perMinute} requests this minute; retry in ${retryAfter} s${caller.kind === 'anonymous' ? '. A free API key (POST /api/v1/keys) has higher limits' : ''}`;
    return new AppError(reason, msg, { retryAfter });
  };

  /** Counts (or peeks) the request in the caller's bucket, sets the headers, admits or refuses. */
  const admitted = (request: FastifyRequest, reply: FastifyReply, caller: Caller, result: LimitResult, done: HookHandlerDoneFunction): void => {
    caller.usage = result;
    request.caller = caller;
    setLimitHeaders(reply, result);
    done(result.allowed ? undefined : reject(caller, result));
  };
  const admit = (request: FastifyRequest, reply: FastifyReply, caller: Caller, done: HookHandlerDoneFunction, now = core.clock.now()): void => {
    const counted = (request.routeOptions.config?.quota ?? 'count') === 'count';
    // a limiter in this process's memory counts at once (no promise turn on the request path)
    if (caller.ip === undefined && counted && core.limiter.hitNow) return admitted(request, reply, caller, core.limiter.hitNow(caller.bucket, caller.limits, now), done);
    (caller.ip !== undefined
      ? hitClient(core.limiter, caller.ip, caller.limits, now, counted)
      : counted ? core.limiter.hit(caller.bucket, caller.limits, now) : core.limiter.peek(caller.bucket, caller.limits, now)).then(
      (result) => admitted(request, reply, caller, result, done),
      done,
    );
  };

  /** A malformed, unknown or revoked key: 401, and the attempt counts against the IP. */
  const refuse = (request: FastifyRequest, reply: FastifyReply, err: unknown, done: HookHandlerDoneFunction): void => {
    if (!(err instanceof AppError && err.type === 'unauthorized')) return done(err as Error);
    hitClient(core.limiter, request.ip, core.config.anon, core.clock.now()).then((r) => {
      setLimitHeaders(reply, r);
      done(err);
    }, done);
  };

  app.addHook('onRequest', (request, reply, done) => {
    if (!isApiRequest(request)) return done();
    // A browser loading the API as an image, style, frame… (an email's <img src="/api/v1/…">) is not
    // a client: refused before it is counted, so no email can spend its reader's quota.
    const dest = request.headers['sec-fetch-dest'];
    if (typeof dest === 'string' && dest !== '' && dest !== 'empty' && dest !== 'document') {
      return done(new AppError('invalid_request', `The API answers scripts and navigations, not ${dest.slice(0, 20)} loads (Sec-Fetch-Dest)`));
    }
    // The admin API: on, it is outside the quota and its own hook checks the admin token (a bearer
    // that is no API key); off, its paths are paths like any other: whatever is sent, the answer is
    // the one an unknown path gets (a bad key 401, else 404), so nothing shows that they exist.
    if (core.config.adminToken && isAdminRequest(request)) return done();
    let raw: string | undefined;
    try {
      raw = presentedKey(request);
    } catch (err) {
      return refuse(request, reply, err, done);
    }
    if (raw === undefined && isPageRequest(request)) {
      const web: Caller = { kind: 'web', key: null, bucket: `web:${ipBucket(request.ip)}`, limits: WEB_LIMITS, concurrentWaits: 0 };
      return admit(request, reply, web, done);
    }
    if (raw === undefined) {
      const anonymous: Caller = { kind: 'anonymous', key: null, bucket: ipBucket(request.ip), limits: core.config.anon, concurrentWaits: 0, ip: request.ip };
      return admit(request, reply, anonymous, done);
    }
    // (a key's record comes through the store's read cache: a revocation shows within its 250 ms;
    // one held there now is used at once, without a promise turn)
    let found: KeyRecord | Promise<KeyRecord>;
    try {
      found = authenticate(core, raw, hash);
    } catch (err) {
      return refuse(request, reply, err, done);
    }
    const use = (key: KeyRecord) => {
      const now = core.clock.now();
      recordUse(key.hash, now);
      admit(request, reply, keyCaller(key), done, now);
    };
    if (found instanceof Promise) found.then(use, (err) => refuse(request, reply, err, done));
    else use(found);
  });
}
