// The route table of /api/v1, one plugin per resource (service, keys, inboxes, emails, webhooks, faults, and
// admin when EPHEMAIL_ADMIN_TOKEN is set): each
// endpoint of the spec with its full schema (params, query, body, every response) and a thin handler
// that calls one service function. Request and reply types are derived from those schemas
// (FastifyPluginAsyncTypebox): a handler cannot read a field its schema does not declare.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../services/core.ts';
import { adminRoutes } from './admin.ts';
import { emailRoutes } from './emails.ts';
import { faultRoutes } from './faults.ts';
import { inboxRoutes } from './inboxes.ts';
import { keyRoutes } from './keys.ts';
import { serviceRoutes } from './service.ts';
import { webhookRoutes } from './webhooks.ts';

/** Registered in this order (the OpenAPI document and /docs list them so), each loaded at once. */
export async function registerRoutes(app: FastifyInstance, core: Core, pageStreamMs?: number): Promise<void> {
  for (const routes of [serviceRoutes, keyRoutes, inboxRoutes, emailRoutes, webhookRoutes, faultRoutes]) await app.register(routes, { core, pageStreamMs });
  // off without the token: not registered at all, so every admin path is 404 like any unknown path
  if (core.config.adminToken) await app.register(adminRoutes, { core, token: core.config.adminToken });
}
