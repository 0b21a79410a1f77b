// CORS for every response: any origin, the rate-limit and MCP headers exposed, and preflights answered
// before anything else runs (no key check, no quota). The same headers, statuses and hook position as
// @fastify/cors with { origin: '*', strictPreflight: false, methods, allowedHeaders, exposedHeaders,
// maxAge } gave, without its per-request option merging and origin-resolution callbacks: with a fixed
// origin every header is a constant.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

const ALLOW_METHODS = ['GET', 'POST', 'DELETE', 'OPTIONS'].join(', ');
const ALLOW_HEADERS = ['Authorization', 'X-API-Key', 'Content-Type', 'Accept', 'Mcp-Session-Id', 'Mcp-Protocol-Version', 'Last-Event-ID'].join(', ');
const EXPOSE_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'Mcp-Session-Id', 'Content-Disposition'].join(', ');
const MAX_AGE = String(86400);

function cors(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  reply.header('Access-Control-Allow-Origin', '*');
  reply.header('Access-Control-Expose-Headers', EXPOSE_HEADERS);
  if (request.raw.method !== 'OPTIONS') return done();
  // A preflight (with or without Origin and Access-Control-Request-Method: not strict) is answered
  // here: 204, no body, Content-Length 0 (Safari waits for a body on a 204 without it).
  reply.header('Access-Control-Allow-Methods', ALLOW_METHODS);
  reply.header('Access-Control-Allow-Headers', ALLOW_HEADERS);
  reply.header('Access-Control-Max-Age', MAX_AGE);
  reply.code(204).header('Content-Length', '0').send();
}

/** Register first: the hook must run before the caller hook (a preflight carries no key). */
export function registerCors(app: FastifyInstance): void {
  app.addHook('onRequest', cors);
  // Lets the router accept OPTIONS on every path; the hook above always answers first.
  app.options('*', { schema: { hide: true } }, (_request, reply) => {
    reply.send();
  });
}
