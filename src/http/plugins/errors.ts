// The one translator of errors to the HTTP envelope (spec: Errors). No framework-default body, no
// stack trace ever reaches a client.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, StoreUnavailableError, type ErrorType, describeError, type ErrorWording } from '../../domain/errors.ts';
import type { Core } from '../../services/core.ts';
import { appendRouteHook } from './route-hooks.ts';

export function envelope(core: Core, type: ErrorType, message: string) {
  return { error: { type, message, docs: `${core.baseUrl()}/docs#error-${type}` } };
}

/** The API's words for a service error: its query and body names, its paths. */
export const HTTP_WORDING: ErrorWording = {
  fields: { address: 'address', domain: 'domain', localPart: 'local_part', from: 'from', subject: 'subject', text: 'text', since: 'since', before: 'before' },
  hint: (h) => {
    if (h.kind === 'list_domains') return ' (GET /api/v1/domains)';
    if (h.kind === 'empty_inbox') return ` Delete its mail first (DELETE /api/v1/inboxes/${h.address}/emails) or omit local_part for a random address.`;
    if (h.kind === 'create_key') return ' with POST /api/v1/keys';
    if (h.kind === 'delete_webhook') return ' (DELETE /api/v1/webhooks/{id})';
    return `; list them at /api/v1/emails/${h.emailId}/attachments`;
  },
};

export function sendError(core: Core, reply: FastifyReply, err: AppError): FastifyReply {
  if (err.retryAfter !== undefined) reply.header('retry-after', String(Math.max(1, Math.ceil(err.retryAfter))));
  return reply.code(err.status).type('application/json; charset=utf-8').send(envelope(core, err.type, describeError(err, HTTP_WORDING)));
}

type AjvError = { instancePath?: string; message?: string; params?: Record<string, unknown>; keyword?: string };

/** "query.limit must be <= 100" from a validation error: names the offending field. */
function describeValidation(err: FastifyError & { validation?: AjvError[]; validationContext?: string }): string {
  const first = err.validation?.[0];
  const where = ({ querystring: 'query', body: 'body', params: 'path', headers: 'header' } as Record<string, string>)[err.validationContext ?? ''] ?? err.validationContext ?? 'request';
  if (!first) return `Invalid ${where}`;
  let field = (first.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  if (first.keyword === 'required' && first.params?.missingProperty) field = [field, String(first.params.missingProperty)].filter(Boolean).join('.');
  if (first.keyword === 'additionalProperties' && first.params?.additionalProperty) {
    return `${where}.${[field, String(first.params.additionalProperty)].filter(Boolean).join('.')} is not a known field`;
  }
  if (first.keyword === 'type' && !field && where === 'body') return 'body must be a JSON object';
  const label = field ? `${where}.${field}` : where;
  return `${label} ${first.message ?? 'is invalid'}`;
}

/** Maps anything thrown in a route (or by Fastify itself) to an AppError. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof StoreUnavailableError) return new AppError('internal_error', 'The store is unreachable; retry shortly', { retryAfter: 5 });
  const e = err as FastifyError & { validation?: AjvError[]; validationContext?: string };
  if (e?.validation) return new AppError('invalid_request', describeValidation(e));
  switch (e?.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('invalid_request', 'Unsupported Content-Type: send the body as application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('invalid_request', 'Request body is larger than 64 KiB');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_request', 'Request body is not valid JSON');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('invalid_request', 'Content-Length does not match the body');
    case 'FST_ERR_BAD_URL':
      return new AppError('invalid_request', 'The path is not valid percent-encoding');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new AppError('invalid_request', 'A path segment is too long (over 1000 characters); no address or id is that long');
  }
  if (e instanceof SyntaxError) return new AppError('invalid_request', 'Request body is not valid JSON');
  const status = typeof e?.statusCode === 'number' ? e.statusCode : 500;
  if (status >= 400 && status < 500) return new AppError('invalid_request', e.message || 'Bad request');
  return new AppError('internal_error', 'Internal error; retry with backoff', { retryAfter: 1 });
}

/** Longest request URL (path and query) served; longer ones get 400 invalid_request. */
export const MAX_URL_LENGTH = 8192;

const pathOf = (url: string) => {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
};
const hasEmptySegment = (url: string) => {
  const path = pathOf(url);
  return path.includes('//') || (path.length > 1 && path.endsWith('/'));
};

/** 404 for an unmatched path: names method and path, and says so when a segment is empty (spec: Errors 2). */
export function routeNotFound(request: FastifyRequest): AppError {
  const path = pathOf(request.url);
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  const empty = hasEmptySegment(request.url) ? ': the path has an empty segment (a doubled or trailing slash)' : '';
  return new AppError('not_found', `No endpoint ${request.method} ${shown}${empty}. See GET /api/v1 for the endpoint index.`);
}

export function registerErrorHandling(app: FastifyInstance, core: Core): void {
  app.setErrorHandler((err, request, reply) => {
    const appErr = toAppError(err);
    if (appErr.type === 'internal_error') request.log.error({ err }, 'request failed');
    return sendError(core, reply, appErr);
  });
  // Query numbers must be finite: the validator coerces "1e309" to Infinity and lets it through.
  // (on the routes whose query has a schema: elsewhere nothing is coerced)
  const finiteQuery = (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
    const q = request.query as Record<string, unknown> | undefined;
    if (q && typeof q === 'object') {
      for (const k of Object.keys(q)) {
        const v = q[k];
        if (typeof v === 'number' && !Number.isFinite(v)) return done(new AppError('invalid_request', `query.${k} must be a finite integer`));
      }
    }
    done();
  };
  app.addHook('onRoute', (route) => {
    if (route.schema?.querystring) appendRouteHook(route, 'preHandler', finiteQuery);
  });
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => sendError(core, reply, routeNotFound(request)));
}

/**
 * A path with an empty segment never reaches a route (a route would see an empty parameter).
 * A URL over 8 KiB is refused before anything parses it (no route takes one that long).
 * Registered after the caller hook (app.ts), so these errors are counted and carry the ratelimit
 * headers like every other /api/v1 response.
 */
export function registerUrlGuard(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.url.length > MAX_URL_LENGTH) return done(new AppError('invalid_request', `The URL is longer than ${MAX_URL_LENGTH} characters`));
    // (the provider emulations' paths are theirs: SES v1 posts to /providers/ses/, trailing slash and all)
    if (hasEmptySegment(request.url) && !request.url.startsWith('/providers/')) return done(routeNotFound(request));
    done();
  });
}
