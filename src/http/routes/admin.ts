// /api/v1/admin/: the operator's API (docs/deploy.md "The admin API"), registered only when
// EPHEMAIL_ADMIN_TOKEN is set; without it every admin path is an unknown path (answered as any other).
// Domains added and retired at run time, API keys listed and revoked (with their fault rules), and
// any key's SMTP fault rules listed and removed. Outside the quota (the caller hook lets these paths
// through); this plugin's own hook checks the token, and refuses a client (IP, IPv6 /64) with
// ADMIN_FAILURES_PER_MINUTE failed attempts this minute (429). Every call is logged with its
// outcome, refused ones at most REFUSED_LINES_PER_MINUTE a minute per node (then counted).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { iso } from '../../domain/clock.ts';
import { AppError } from '../../domain/errors.ts';
import { ipBucket } from '../../domain/limits.ts';
import type { Core } from '../../services/core.ts';
import type { DomainEntry } from '../../services/domains.ts';
import * as faults from '../../services/faults.ts';
import { listKeys, revokeKeys } from '../../services/keys.ts';
import type { FaultRule } from '../../store/faults.ts';
import type { KeyRecord } from '../../store/keys.ts';
import { toAppError } from '../plugins/errors.ts';
import { FaultSchema } from './faults.ts';
import { data, errors } from './shared.ts';

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));
const NullableTime = (description: string) => Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description });

export const AdminDomainSchema = Type.Object(
  {
    domain: Type.String(),
    source: Type.Union([Type.Literal('config'), Type.Literal('added')], { description: 'config: EPHEMAIL_DOMAINS (always active); added: at run time' }),
    state: Type.Union([Type.Literal('active'), Type.Literal('retired')], { description: 'retired: no new mail or inboxes; stored mail stays readable until it expires' }),
    added_at: NullableTime('When it was (last) added; null for EPHEMAIL_DOMAINS'),
    retired_at: NullableTime('When it was retired; null while active'),
  },
  { $id: 'AdminDomain', title: 'AdminDomain' },
);

export const AdminKeySchema = Type.Object(
  {
    key_prefix: Type.String({ description: 'The first 12 characters of the key (never the key or its hash)' }),
    label: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: NullableTime('The first request of the latest minute it was used in (recorded once a minute per node); null if never'),
    revoked_at: NullableTime('When it was revoked; null while valid'),
  },
  { $id: 'AdminKey', title: 'AdminKey' },
);

export const AdminFaultSchema = Type.Object(
  {
    ...FaultSchema.properties,
    key_prefix: Type.String({ description: 'The first 12 characters of the key that made the rule (never the key or its hash)' }),
    key_revoked: Type.Boolean({ description: 'The key was revoked: the rule no longer applies (listed until removed or expired)' }),
  },
  { $id: 'AdminFault', title: 'AdminFault' },
);

const DomainBody = Type.Object({ domain: Type.String({ minLength: 1, maxLength: 260, description: 'The domain name, e.g. mail2.example.net' }) }, { additionalProperties: false });
const DomainParams = Type.Object({ domain: Type.String({ maxLength: 260, description: 'An added domain' }) });
const PrefixParams = Type.Object({ prefix: Type.String({ maxLength: 100, description: 'The whole 12-character key prefix (eph_ and 8 more)' }) });
const KeysQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'How many keys, newest first' }),
  prefix: Type.Optional(Type.String({ maxLength: 12, description: 'Only keys whose prefix starts with this' })),
});

/** The admin token as a bearer (http/openapi.ts declares it when the admin API is on). */
export const ADMIN_SECURITY: { [label: string]: string[] }[] = [{ adminToken: [] }];

const toWireDomain = (d: DomainEntry) => ({ domain: d.domain, source: d.source, state: d.state, added_at: isoOrNull(d.addedAt), retired_at: isoOrNull(d.retiredAt) });
const toWireAdminKey = (k: KeyRecord) => ({ key_prefix: k.prefix, label: k.label, created_at: iso(k.createdAt), last_used_at: isoOrNull(k.lastUsedAt), revoked_at: isoOrNull(k.revokedAt) });

const FaultsQuery = Type.Object({
  address: Type.Optional(Type.String({ maxLength: 320, description: 'Rules on this inbox address (every key\'s)' })),
  key_prefix: Type.Optional(Type.String({ maxLength: 100, description: 'Rules of the key with this whole 12-character prefix (on every address)' })),
}, { additionalProperties: false, description: 'At least one of address and key_prefix; both: that key\'s rules on that address' });

const KEY_PREFIX_RE = /^eph_[0-9A-Za-z]{8}$/;

/** Failed admin-token attempts a client (an IPv4 address or an IPv6 /64) may make in a minute window; then 429 until it turns. */
export const ADMIN_FAILURES_PER_MINUTE = 10;
/** `admin call refused` lines a node writes in a minute; past them refusals are counted and summed up in one line. */
export const REFUSED_LINES_PER_MINUTE = 20;
const FAILURE_LIMITS = { perMinute: ADMIN_FAILURES_PER_MINUTE, perDay: Infinity };

/** Compares the presented token's hash with the configured one's: constant time, whatever the lengths. */
export function adminTokenCheck(token: string): (presented: string) => boolean {
  const expected = createHash('sha256').update(token).digest();
  return (presented) => timingSafeEqual(createHash('sha256').update(presented).digest(), expected);
}

export const adminRoutes: FastifyPluginAsyncTypebox<{ core: Core; token: string }> = async (app, { core, token }) => {
  const valid = adminTokenCheck(token);
  /** The error type each failed call ended with, for its log line. */
  const failures = new WeakMap<FastifyRequest, string>();

  app.addSchema(AdminDomainSchema);
  app.addSchema(AdminKeySchema);
  app.addSchema(AdminFaultSchema);
  const FaultRef = Type.Ref(AdminFaultSchema);
  const DomainRef = Type.Ref(AdminDomainSchema);
  const KeyRef = Type.Ref(AdminKeySchema);

  // Failed attempts, per client, in the limiter (shared by every node): a client past the limit is
  // refused before its token is looked at, so guessing stops; a right token spends nothing.
  const failureBucket = (request: FastifyRequest) => `adminfail:${ipBucket(request.ip)}`;
  const throttled = (retryAfter: number) => new AppError('rate_limited', `More than ${ADMIN_FAILURES_PER_MINUTE} failed admin-token attempts from this address this minute; retry in ${retryAfter} s`, { retryAfter });
  app.addHook('onRequest', (request, _reply, done) => {
    const bucket = failureBucket(request);
    core.limiter.peek(bucket, FAILURE_LIMITS, core.clock.now()).then((seen) => {
      if (seen.usedMinute >= ADMIN_FAILURES_PER_MINUTE) return done(throttled(seen.resetSeconds));
      const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      if (m && valid(m[1])) return done();
      const refused = new AppError('unauthorized', m ? 'The admin token is not valid' : 'The admin API needs Authorization: Bearer <EPHEMAIL_ADMIN_TOKEN>');
      // counted; the attempt that goes past the limit (parallel ones) is answered 429 too
      core.limiter.hit(bucket, FAILURE_LIMITS, core.clock.now()).then((r) => done(r.allowed ? refused : throttled(r.retryAfterSeconds)), done);
    }, done);
  });
  app.addHook('onError', (request, _reply, err, done) => {
    failures.set(request, toAppError(err).type);
    done();
  });
  // refused calls (401, 429) are logged one by one up to REFUSED_LINES_PER_MINUTE a minute on this
  // node; the rest are counted, and the count is logged when the next minute's first call comes
  let minute = -1;
  let refusedLines = 0;
  let unlogged = 0;
  const turnMinute = (now: number, log: FastifyRequest['log']) => {
    const m = Math.floor(now / 60_000);
    if (m === minute) return;
    if (unlogged > 0) log.warn({ admin: { refused_unlogged: unlogged } }, 'admin calls refused and not logged one by one last minute');
    minute = m;
    refusedLines = 0;
    unlogged = 0;
  };
  app.addHook('onResponse', (request, reply, done) => {
    const status = reply.statusCode;
    const refused = status === 401 || status === 429;
    turnMinute(core.clock.now(), request.log);
    if (refused) {
      if (refusedLines >= REFUSED_LINES_PER_MINUTE) {
        unlogged++;
        return done();
      }
      refusedLines++;
    }
    const params = request.params as { domain?: string; prefix?: string } | undefined;
    const body = request.body as { domain?: unknown } | undefined;
    const query = request.query as { address?: unknown; key_prefix?: unknown } | undefined;
    const fromQuery = [query?.address, query?.key_prefix].filter((v) => typeof v === 'string').map((v) => (v as string).slice(0, 320)).join(' ') || undefined;
    const target = params?.domain ?? params?.prefix ?? (typeof body?.domain === 'string' ? body.domain.slice(0, 260) : undefined) ?? fromQuery;
    const line = { admin: { route: `${request.method} ${request.routeOptions.url}`, target, status, outcome: failures.get(request) ?? (status < 400 ? 'ok' : String(status)), ip: request.ip } };
    if (refused) request.log.warn(line, 'admin call refused');
    else request.log.info(line, 'admin call');
    done();
  });

  const tags = ['admin'];

  app.get('/api/v1/admin/domains', {
    schema: {
      operationId: 'adminListDomains', tags, summary: 'Every domain: EPHEMAIL_DOMAINS and those added at run time, active or retired, with when.', security: ADMIN_SECURITY,
      response: { 200: Type.Object({ data: Type.Array(DomainRef), meta: Type.Object({ count: Type.Integer() }) }, { description: 'EPHEMAIL_DOMAINS first, then added ones, oldest first' }), ...errors('unauthorized', 'rate_limited') },
    },
  }, async () => {
    const all = await core.domains.list();
    return { data: all.map(toWireDomain), meta: { count: all.length } };
  });

  app.post('/api/v1/admin/domains', {
    schema: {
      operationId: 'adminAddDomain', tags,
      summary: 'Add a domain (or add a retired one again): listed, offered and taking mail on every node within 2 s. Point its MX at the service first.',
      security: ADMIN_SECURITY,
      body: DomainBody,
      response: { 201: data(DomainRef, 'Added'), 200: data(DomainRef, 'It already was active; nothing changed'), ...errors('invalid_request', 'unauthorized', 'conflict', 'rate_limited') },
    },
  }, async (request, reply) => {
    const { entry, created } = await core.domains.add(request.body.domain);
    reply.code(created ? 201 : 200);
    return { data: toWireDomain(entry) };
  });

  app.delete('/api/v1/admin/domains/:domain', {
    schema: {
      operationId: 'adminRetireDomain', tags,
      summary: 'Retire an added domain: no new mail or inboxes there (on every node within 2 s); its stored mail stays readable until it expires. Domains of EPHEMAIL_DOMAINS cannot be retired (409).',
      security: ADMIN_SECURITY,
      params: DomainParams,
      response: { 200: data(DomainRef, 'Retired (or already retired)'), ...errors('invalid_request', 'unauthorized', 'not_found', 'conflict', 'rate_limited') },
    },
  }, async (request) => ({ data: toWireDomain(await core.domains.retire(request.params.domain)) }));

  app.get('/api/v1/admin/keys', {
    schema: {
      operationId: 'adminListKeys', tags, summary: 'API keys, newest first: prefix, label, when created, last used and revoked. Never a key or its hash.', security: ADMIN_SECURITY,
      querystring: KeysQuery,
      response: { 200: Type.Object({ data: Type.Array(KeyRef), meta: Type.Object({ count: Type.Integer(), total: Type.Integer({ description: 'Keys matching, before the limit' }) }) }, { description: 'Keys' }), ...errors('invalid_request', 'unauthorized', 'rate_limited') },
    },
  }, async (request) => {
    const { limit, prefix } = request.query;
    const matching = (await listKeys(core)).filter((k) => prefix === undefined || k.prefix.startsWith(prefix)).reverse();
    return { data: matching.slice(0, limit).map(toWireAdminKey), meta: { count: Math.min(limit, matching.length), total: matching.length } };
  });

  app.delete('/api/v1/admin/keys/:prefix', {
    schema: {
      operationId: 'adminRevokeKey', tags, summary: 'Revoke a key by its whole prefix: it gets 401 unauthorized on every node within 2 s. Revoking it again changes nothing.', security: ADMIN_SECURITY,
      params: PrefixParams,
      response: { 200: data(KeyRef, 'Revoked (or already revoked)'), ...errors('invalid_request', 'unauthorized', 'not_found', 'rate_limited') },
    },
  }, async (request) => {
    const { prefix } = request.params;
    if (!KEY_PREFIX_RE.test(prefix)) {
      throw new AppError('invalid_request', 'Name the key by its whole 12-character prefix (eph_ and 8 more, as GET /api/v1/admin/keys shows it), so one call revokes exactly one key');
    }
    const [revoked] = await revokeKeys(core, prefix);
    const key = revoked ?? (await listKeys(core)).find((k) => k.prefix === prefix && k.revokedAt !== null);
    if (!key) throw new AppError('not_found', `No key has the prefix ${prefix}`);
    // its fault rules stopped applying with the revocation (the store); now they go
    await faults.removeFaults(core, { keyHashes: [key.hash] });
    return { data: toWireAdminKey(key) };
  });

  /** The keys a whole prefix names (one, but two keys may share a prefix), or 400/404. */
  const keysOf = async (prefix: string | undefined): Promise<KeyRecord[] | undefined> => {
    if (prefix === undefined) return undefined;
    if (!KEY_PREFIX_RE.test(prefix)) throw new AppError('invalid_request', 'query.key_prefix must be a whole 12-character key prefix (eph_ and 8 more, as GET /api/v1/admin/keys shows it)');
    const found = (await listKeys(core)).filter((k) => k.prefix === prefix);
    if (found.length === 0) throw new AppError('not_found', `No key has the prefix ${prefix}`);
    return found;
  };
  const selection = async (query: { address?: string; key_prefix?: string }): Promise<faults.FaultSelection> => {
    if (query.address === undefined && query.key_prefix === undefined) {
      throw new AppError('invalid_request', 'Name the rules with query.address, query.key_prefix or both');
    }
    return { address: query.address, keyHashes: (await keysOf(query.key_prefix))?.map((k) => k.hash) };
  };

  app.get('/api/v1/admin/faults', {
    schema: {
      operationId: 'adminListFaults', tags, security: ADMIN_SECURITY, querystring: FaultsQuery,
      summary: 'SMTP fault rules of every key: those on an address, those of a key, or that key\'s on that address; in creation order, with the key\'s prefix and whether it was revoked (a revoked key\'s rules no longer apply).',
      response: { 200: Type.Object({ data: Type.Array(FaultRef), meta: Type.Object({ count: Type.Integer() }) }, { description: 'Rules' }), ...errors('invalid_request', 'unauthorized', 'not_found', 'rate_limited') },
    },
  }, async (request) => {
    const rules = await faults.findFaults(core, await selection(request.query));
    const keys = new Map((await listKeys(core)).map((k) => [k.hash, k]));
    const wire = (r: FaultRule) => ({ ...faults.toWireFault(r), key_prefix: keys.get(r.keyHash)?.prefix ?? '', key_revoked: (keys.get(r.keyHash)?.revokedAt ?? null) !== null });
    return { data: rules.map(wire), meta: { count: rules.length } };
  });

  app.delete('/api/v1/admin/faults', {
    schema: {
      operationId: 'adminDeleteFaults', tags, security: ADMIN_SECURITY, querystring: FaultsQuery,
      summary: 'Remove SMTP fault rules of any key: those on an address, those of a key, or that key\'s on that address. They stop applying on every node at once.',
      response: { 200: data(Type.Object({ deleted: Type.Integer({ description: 'Rules removed' }) }), 'Removed (0: there were none)'), ...errors('invalid_request', 'unauthorized', 'not_found', 'rate_limited') },
    },
  }, async (request) => ({ data: { deleted: await faults.removeFaults(core, await selection(request.query)) } }));
};
