// /api/v1/keys and /api/v1/me: free API keys and the caller's identity.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { Core } from '../../services/core.ts';
import { mintKey } from '../../services/keys.ts';
import { ApiKeySchema, IdentitySchema, toWireKey, toWireLimits } from '../schemas/wire.ts';
import { SECURITY, data, errors } from './shared.ts';

const KeyBody = Type.Optional(
  Type.Object(
    {
      label: Type.Optional(Type.String({ maxLength: 100, description: 'Free text to recognise the key by; "" when omitted' })),
      contact_email: Type.Optional(Type.String({ maxLength: 254, description: 'Unverified; used only to warn of breaking changes' })),
    },
    { additionalProperties: false },
  ),
);

export const keyRoutes: FastifyPluginAsyncTypebox<{ core: Core }> = async (app, { core }) => {
  app.post('/api/v1/keys', {
    schema: {
      operationId: 'createKey', tags: ['keys'], summary: 'Create a free API key (3 per IP per 24 hours). The raw key is shown once.', security: SECURITY,
      body: KeyBody,
      response: { 201: data(Type.Ref(ApiKeySchema), 'The new key'), ...errors('invalid_request', 'unauthorized', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    const minted = await mintKey(core, { label: request.body?.label, contactEmail: request.body?.contact_email }, request.ip);
    request.log.info({ key_prefix: minted.record.prefix }, 'api key created');
    reply.code(201);
    return { data: toWireKey(core, minted.apiKey, minted.record) };
  });

  app.get('/api/v1/me', {
    config: { quota: 'peek' },
    schema: {
      operationId: 'me', tags: ['keys'], summary: 'Caller identity, limits and usage. Does not consume quota.', security: SECURITY,
      response: { 200: data(Type.Ref(IdentitySchema), 'Identity'), ...errors('unauthorized') },
    },
  }, async (request) => {
    const c = request.caller;
    return {
      data: {
        kind: c.kind === 'key' ? 'key' as const : 'anonymous' as const, // (/me is never a web caller's: web-caller.ts)
        tier: c.kind === 'key' ? 'free' as const : 'anonymous' as const,
        key_prefix: c.key?.prefix ?? null,
        label: c.key?.label ?? null,
        limits: toWireLimits(c.limits, c.concurrentWaits),
        usage: { requests_this_minute: c.usage?.usedMinute ?? 0, requests_today: c.usage?.usedDay ?? 0 },
      },
    };
  });
};
