// /api/v1/admin/: the operator's API (docs/deploy.md "The admin API"), registered only when
// EPHEMAIL_ADMIN_TOKEN is set; without it every admin path is an unknown path (404). Domains added and
// retired at run time, and API keys listed and revoked. Outside the quota (the caller hook lets these
// paths through); this plugin's own hook checks the token; every call is logged with its outcome.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { iso } from '../../domain/clock.ts';
import { AppError } from '../../domain/errors.ts';
import type { Core } from '../../services/core.ts';
import type { DomainEntry } from '../../services/domains.ts';
import { listKeys, revokeKeys } from '../../services/keys.ts';
import type { KeyRecord } from '../../store/keys.ts';
import { toAppError } from '../plugins/errors.ts';
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

const KEY_PREFIX_RE = /^eph_[0-9A-Za-z]{8}$/;

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
  const DomainRef = Type.Ref(AdminDomainSchema);
  const KeyRef = Type.Ref(AdminKeySchema);

  app.addHook('onRequest', (request, _reply, done) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!m) return done(new AppError('unauthorized', 'The admin API needs Authorization: Bearer <EPHEMAIL_ADMIN_TOKEN>'));
    if (!valid(m[1])) return done(new AppError('unauthorized', 'The admin token is not valid'));
    done();
  });
  app.addHook('onError', (request, _reply, err, done) => {
    failures.set(request, toAppError(err).type);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const status = reply.statusCode;
    const params = request.params as { domain?: string; prefix?: string } | undefined;
    const body = request.body as { domain?: unknown } | undefined;
    const target = params?.domain ?? params?.prefix ?? (typeof body?.domain === 'string' ? body.domain.slice(0, 260) : undefined);
    const line = { admin: { route: `${request.method} ${request.routeOptions.url}`, target, status, outcome: failures.get(request) ?? (status < 400 ? 'ok' : String(status)), ip: request.ip } };
    if (status === 401) request.log.warn(line, 'admin call refused');
    else request.log.info(line, 'admin call');
    done();
  });

  const tags = ['admin'];

  app.get('/api/v1/admin/domains', {
    schema: {
      operationId: 'adminListDomains', tags, summary: 'Every domain: EPHEMAIL_DOMAINS and those added at run time, active or retired, with when.', security: ADMIN_SECURITY,
      response: { 200: Type.Object({ data: Type.Array(DomainRef), meta: Type.Object({ count: Type.Integer() }) }, { description: 'EPHEMAIL_DOMAINS first, then added ones, oldest first' }), ...errors('unauthorized') },
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
      response: { 201: data(DomainRef, 'Added'), 200: data(DomainRef, 'It already was active; nothing changed'), ...errors('invalid_request', 'unauthorized', 'conflict') },
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
      response: { 200: data(DomainRef, 'Retired (or already retired)'), ...errors('invalid_request', 'unauthorized', 'not_found', 'conflict') },
    },
  }, async (request) => ({ data: toWireDomain(await core.domains.retire(request.params.domain)) }));

  app.get('/api/v1/admin/keys', {
    schema: {
      operationId: 'adminListKeys', tags, summary: 'API keys, newest first: prefix, label, when created, last used and revoked. Never a key or its hash.', security: ADMIN_SECURITY,
      querystring: KeysQuery,
      response: { 200: Type.Object({ data: Type.Array(KeyRef), meta: Type.Object({ count: Type.Integer(), total: Type.Integer({ description: 'Keys matching, before the limit' }) }) }, { description: 'Keys' }), ...errors('invalid_request', 'unauthorized') },
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
      response: { 200: data(KeyRef, 'Revoked (or already revoked)'), ...errors('invalid_request', 'unauthorized', 'not_found') },
    },
  }, async (request) => {
    const { prefix } = request.params;
    if (!KEY_PREFIX_RE.test(prefix)) {
      throw new AppError('invalid_request', 'Name the key by its whole 12-character prefix (eph_ and 8 more, as GET /api/v1/admin/keys shows it), so one call revokes exactly one key');
    }
    const [revoked] = await revokeKeys(core, prefix);
    const key = revoked ?? (await listKeys(core)).find((k) => k.prefix === prefix && k.revokedAt !== null);
    if (!key) throw new AppError('not_found', `No key has the prefix ${prefix}`);
    return { data: toWireAdminKey(key) };
  });
};
