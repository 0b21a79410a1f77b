// /api/v1 and /api/v1/health: discovery and health, outside the quota.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Core } from '../../services/core.ts';
import { PROVIDER_OPENAPI_PATH, PROVIDER_PREFIXES } from '../providers/prefixes.ts';
import { HealthSchema } from '../schemas/wire.ts';
import { SECURITY, data, errors } from './shared.ts';

const MailEndpointSchema = Type.Object({
  host: Type.String({ description: 'The service\'s public host name (of EPHEMAIL_PUBLIC_URL)' }),
  port: Type.Integer(),
  starttls: Type.Boolean({ description: 'STARTTLS (IMAP) / STLS (POP3) offered; plaintext login is refused before it' }),
});

export const serviceRoutes: FastifyPluginAsyncTypebox<{ core: Core }> = async (app, { core }) => {
  app.get('/api/v1', {
    config: { quota: 'peek' },
    schema: {
      operationId: 'discover', tags: ['service'], summary: 'Service discovery: endpoint index, docs links and the email TTL. Outside the quota.', security: SECURITY,
      response: { 200: data(Type.Object({
        name: Type.String(), version: Type.String(), email_ttl_seconds: Type.Integer(), domains: Type.Array(Type.String()),
        docs: Type.Object({ html: Type.String(), openapi: Type.String() }),
        mcp: Type.String(), web: Type.String(),
        mail_access: Type.Object({
          imap: Type.Union([MailEndpointSchema, Type.Null()], { description: 'IMAP4rev1: user the inbox address, password anything or an API key (docs/imap.md); null when off' }),
          pop3: Type.Union([MailEndpointSchema, Type.Null()], { description: 'POP3, the same login; null when off' }),
        }, { description: 'Where mail clients read any inbox (IMAP, POP3). Additive.' }),
        endpoints: Type.Array(Type.Object({ method: Type.String(), path: Type.String(), summary: Type.String() })),
        providers: Type.Object({
          openapi: Type.String({ description: 'The emulations\' own OpenAPI document (not part of this contract)' }),
          sendgrid: Type.String(), ses: Type.String(), postmark: Type.String(), resend: Type.String(), mailgun: Type.String(),
        }, { description: 'Base URLs of the provider API emulations: point the provider\'s SDK here (docs/providers.md). Additive.' }),
      }), 'Service index'), ...errors('unauthorized') },
    },
  }, async () => ({
    data: {
      name: 'ephemail',
      version: '1.0.0',
      email_ttl_seconds: core.config.emailTtlSeconds,
      domains: [...core.domains.active()],
      docs: { html: `${core.baseUrl()}/docs`, openapi: `${core.baseUrl()}/api/v1/openapi.json` },
      mcp: `${core.baseUrl()}/mcp`,
      web: `${core.baseUrl()}/`,
      mail_access: core.mailAccess?.() ?? { imap: null, pop3: null },
      endpoints: app.endpointList,
      providers: {
        openapi: `${core.baseUrl()}${PROVIDER_OPENAPI_PATH}`,
        sendgrid: `${core.baseUrl()}${PROVIDER_PREFIXES.sendgrid}`,
        ses: `${core.baseUrl()}${PROVIDER_PREFIXES.ses}`,
        postmark: `${core.baseUrl()}${PROVIDER_PREFIXES.postmark}`,
        resend: `${core.baseUrl()}${PROVIDER_PREFIXES.resend}`,
        mailgun: `${core.baseUrl()}${PROVIDER_PREFIXES.mailgun}`,
      },
    },
  }));

  app.get('/api/v1/health', {
    config: { quota: 'peek' },
    schema: {
      operationId: 'health', tags: ['service'], summary: 'Health check: the store answers a trivial query and the SMTP listener runs. Outside the quota.', security: SECURITY,
      response: { 200: data(Type.Ref(HealthSchema), 'Healthy'), 503: data(Type.Ref(HealthSchema), 'Degraded: the failing part is named'), ...errors('unauthorized') },
    },
  }, async (_req, reply) => {
    let database: 'connected' | 'disconnected' = 'connected';
    try {
      await core.store.ping();
    } catch {
      database = 'disconnected';
    }
    const smtp = core.smtpRunning() ? 'running' as const : 'stopped' as const;
    const ok = database === 'connected' && smtp === 'running';
    reply.code(ok ? 200 : 503);
    return { data: { status: ok ? 'ok' as const : 'degraded' as const, database, smtp } };
  });
};
