// /api/v1/webhooks: register, list and delete a key's webhooks, and see their recent delivery
// attempts (docs/push.md "Webhooks"). Every route needs a key; a webhook is visible only to its key.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { iso } from '../../domain/clock.ts';
import { AppError } from '../../domain/errors.ts';
import { WEBHOOK_URL_MAX } from '../../domain/webhook-url.ts';
import type { Core } from '../../services/core.ts';
import type { DeliveryAttempt, WebhookRecord } from '../../store/webhooks.ts';
import { NoContent, errors } from './shared.ts';


export const WebhookSchema = Type.Object(
  {
    id: Type.String({ description: 'wh_…' }),
    url: Type.String({ description: 'Where events are POSTed' }),
    address: Type.String({ description: 'The inbox address, or *@<domain> for every inbox of the domain' }),
    created_at: Type.String({ format: 'date-time' }),
    secret: Type.Optional(Type.String({ description: 'whsec_…: the Standard Webhooks signing secret. Returned only when the webhook is created.' })),
  },
  { $id: 'Webhook', title: 'Webhook' },
);

export const DeliverySchema = Type.Object(
  {
    event_id: Type.String({ description: 'The webhook-id header: the same on every attempt of one event' }),
    email_id: Type.String(),
    attempt: Type.Integer({ minimum: 0, description: '1 for the first attempt; 0 for an event that was dropped (never sent)' }),
    attempted_at: Type.String({ format: 'date-time' }),
    status: Type.Union([Type.Literal('delivered'), Type.Literal('retrying'), Type.Literal('gave_up'), Type.Literal('dropped')], { description: 'delivered (2xx), retrying (a later attempt is scheduled), gave_up (the email expired, the address is refused, or the webhook or its key is gone) or dropped (never queued: a fan-out limit; error says which)' }),
    response_code: Type.Union([Type.Integer(), Type.Null()], { description: 'The receiver\'s HTTP status; null when no response came' }),
    error: Type.Union([Type.String(), Type.Null()], { description: 'Why the attempt failed; null when delivered' }),
    next_retry_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'WebhookDelivery', title: 'WebhookDelivery' },
);

const WebhookBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: WEBHOOK_URL_MAX, description: 'http(s) URL of the receiver. Loopback, private, link-local and metadata addresses are refused (here and at each delivery, after DNS) unless the operator set EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true.' }),
    address: Type.String({ minLength: 3, maxLength: 320, description: 'An inbox address, or *@<domain> for every inbox of an active domain (403 forbidden unless the operator set EPHEMAIL_WEBHOOK_WILDCARD=true)' }),
  },
  { additionalProperties: false },
);
const IdParams = Type.Object({ id: Type.String({ maxLength: 100, description: 'Webhook id (wh_…)' }) });
const DeliveriesQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'How many attempts, newest first' }),
});

const WEBHOOK_SECURITY: { [label: string]: string[] }[] = [{ bearer: [] }, { apiKey: [] }];

const toWireWebhook = (w: WebhookRecord, withSecret = false) => ({
  id: w.id, url: w.url, address: w.target, created_at: iso(w.createdAt), ...(withSecret ? { secret: w.secret } : {}),
});
const toWireDelivery = (a: DeliveryAttempt) => ({
  event_id: a.jobId, email_id: a.emailId, attempt: a.attempt, attempted_at: iso(a.at), status: a.status,
  response_code: a.responseCode, error: a.error, next_retry_at: a.nextRetryAt === null ? null : iso(a.nextRetryAt),
});

function keyOf(request: FastifyRequest): string {
  const c = request.caller;
  if (c.kind !== 'key' || !c.key) throw new AppError('key_required', 'webhooks belong to an API key: create one with POST /api/v1/keys and send it as Authorization: Bearer <key> or X-API-Key');
  return c.key.hash;
}

export const webhookRoutes: FastifyPluginAsyncTypebox<{ core: Core }> = async (app, { core }) => {
  app.addSchema(WebhookSchema);
  app.addSchema(DeliverySchema);
  const WebhookRef = Type.Ref(WebhookSchema);

  app.post('/api/v1/webhooks', {
    schema: {
      operationId: 'createWebhook', tags: ['webhooks'], security: WEBHOOK_SECURITY, body: WebhookBody,
      summary: 'Register a webhook for one inbox, or for a whole domain (*@<domain>) where the operator allows it (EPHEMAIL_WEBHOOK_WILDCARD=true; otherwise 403 forbidden). Each new email is POSTed as an `email.received` event signed with Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature); failed deliveries are retried with backoff for the email\'s lifetime. The secret is shown once. At most 10 per key and 10 per address (all keys together; 409 too_many_webhooks). Additive.',
      response: { 201: Type.Object({ data: WebhookRef }, { description: 'The webhook, with its secret (shown only now)' }), ...errors('invalid_request', 'unauthorized', 'key_required', 'forbidden', 'too_many_webhooks', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    const keyHash = keyOf(request);
    const hook = await core.webhooks.register(keyHash, { url: request.body.url, address: request.body.address });
    request.log.info({ webhook_id: hook.id, target: hook.target }, 'webhook created');
    reply.code(201);
    return { data: toWireWebhook(hook, true) };
  });

  app.get('/api/v1/webhooks', {
    schema: {
      operationId: 'listWebhooks', tags: ['webhooks'], security: WEBHOOK_SECURITY, summary: 'The key\'s webhooks, oldest first (without secrets). Additive.',
      response: { 200: Type.Object({ data: Type.Array(WebhookRef), meta: Type.Object({ count: Type.Integer() }) }, { description: 'Webhooks' }), ...errors('unauthorized', 'key_required', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request) => {
    const list = await core.webhooks.list(keyOf(request));
    return { data: list.map((w) => toWireWebhook(w)), meta: { count: list.length } };
  });

  app.delete('/api/v1/webhooks/:id', {
    schema: {
      operationId: 'deleteWebhook', tags: ['webhooks'], security: WEBHOOK_SECURITY, params: IdParams, summary: 'Delete a webhook; its pending deliveries are dropped. Additive.',
      response: { 204: NoContent, ...errors('unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    await core.webhooks.remove(keyOf(request), request.params.id);
    return reply.code(204).send(null); // (a 204 carries no body)
  });

  app.get('/api/v1/webhooks/:id/deliveries', {
    schema: {
      operationId: 'listWebhookDeliveries', tags: ['webhooks'], security: WEBHOOK_SECURITY, params: IdParams, querystring: DeliveriesQuery,
      summary: 'Recent delivery attempts of a webhook, newest first (the last 100, for two hours): status, response code and next retry; events dropped by a fan-out limit show as status dropped. Additive.',
      response: {
        200: Type.Object({
          data: Type.Array(Type.Ref(DeliverySchema)),
          meta: Type.Object({ webhook_id: Type.String(), count: Type.Integer(), pending: Type.Integer({ description: 'Events queued for this webhook now (waiting for a first attempt or a retry)' }) }),
        }, { description: 'Attempts' }),
        ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded'),
      },
    },
  }, async (request) => {
    const { webhook, attempts, pending } = await core.webhooks.deliveries(keyOf(request), request.params.id, request.query.limit);
    return { data: attempts.map(toWireDelivery), meta: { webhook_id: webhook.id, count: attempts.length, pending } };
  });
};
