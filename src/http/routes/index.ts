// The route table of /api/v1, one file per resource (service, keys, inboxes, emails, webhooks): each
// endpoint of the spec with its full schema (params, query, body, every response) and a thin handler
// that calls one service function.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../services/core.ts';
import { registerEmailRoutes } from './emails.ts';
import { registerInboxRoutes } from './inboxes.ts';
import { registerKeyRoutes } from './keys.ts';
import { registerServiceRoutes } from './service.ts';
import { registerWebhookRoutes } from './webhooks.ts';

export function registerRoutes(app: FastifyInstance, core: Core): void {
  registerServiceRoutes(app, core);
  registerKeyRoutes(app, core);
  registerInboxRoutes(app, core);
  registerEmailRoutes(app, core);
  registerWebhookRoutes(app, core);
}
