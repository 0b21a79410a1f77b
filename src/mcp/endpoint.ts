// POST /mcp, the tool endpoint (spec: "POST /mcp (tool endpoint)"; docs/contract-decisions.md "Tool endpoint limits"
// and "Tool endpoint protocol"). The SDK's stateless Streamable HTTP transport with JSON responses
// answers JSON-RPC; this file holds the transport rules the SDK does not apply by itself: the Host
// check, Accept with JSON only, batches refused, signed Mcp-Session-Id on initialize, per-session
// rate-limit buckets, GET/DELETE → 405, and JSON-RPC errors (never the /api/v1 envelope) for
// everything that goes wrong before a message reaches the SDK.
//
// The SDK, zod, the tools and the HTML→text converter are loaded at the first POST /mcp, not at
// start (start-up time and idle memory): the route is registered at start all the same.
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BODY_LIMIT, ipBucket } from '../domain/limits.ts';
import { hitClient } from '../limiter/limiter.ts';
import type { Limits } from '../config.ts';
import type { Core } from '../services/core.ts';
import { readerOf } from '../services/views.ts';
import { createSessionIds, SESSION_LIFETIME_MS } from './session.ts';

/** Every session of one IP together may make this many times the IP's own (anonymous) quota. */
export const SESSIONS_PER_IP_FACTOR = 5;
const sessionsCeiling = (l: Limits): Limits => ({ perMinute: l.perMinute * SESSIONS_PER_IP_FACTOR, perDay: l.perDay * SESSIONS_PER_IP_FACTOR });

/** The SDK and the tool definitions, imported once, on first use. */
async function loadSdk() {
  const [{ WebStandardStreamableHTTPServerTransport }, { isInitializeRequest, isJSONRPCRequest, JSONRPCMessageSchema }, { buildServer, limitError, listTools, PROTOCOL_VERSIONS }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
    import('./server.ts'),
  ]);
  return { WebStandardStreamableHTTPServerTransport, isInitializeRequest, isJSONRPCRequest, JSONRPCMessageSchema, buildServer, limitError, PROTOCOL_VERSIONS, wireTools: listTools() };
}
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

type Id = string | number | null;

/** JSON-RPC error codes used on this endpoint. */
export const RPC = { parseError: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602, internal: -32603, server: -32000, sessionExpired: -32001 } as const;

function rpcError(reply: FastifyReply, status: number, code: number, message: string, id: Id = null, data?: unknown): FastifyReply {
  const error: Record<string, unknown> = { code, message };
  if (data !== undefined) error.data = data;
  return reply.code(status).type('application/json').send({ jsonrpc: '2.0', id, error });
}

const LOOPBACK_NAMES = new Set(['localhost', '::1', '[::1]']);

/** Hostnames a request may name (DNS-rebinding protection): the public URL's host and loopback names. */
export function allowedHost(core: Core, hostHeader: string | undefined): boolean {
  if (!hostHeader) return false;
  let hostname: string;
  try {
    hostname = new URL(`http://${hostHeader.trim()}`).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (LOOPBACK_NAMES.has(hostname) || hostname.endsWith('.localhost') || /^127(?:\.\d{1,3}){3}$/.test(hostname)) return true;
  return hostname === new URL(core.baseUrl()).hostname.toLowerCase();
}

/** Whether an Accept header admits a JSON answer (absent, application/json, application/*, or *\/*). */
export function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((part) => {
    const [type, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    if (q !== undefined && Number(q.slice(2)) === 0) return false;
    return type === 'application/json' || type === 'application/*' || type === '*/*';
  });
}

const header = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

export async function registerMcp(app: FastifyInstance, core: Core): Promise<void> {
  const sessions = createSessionIds(core.config.sessionSecret);
  let sdk: Promise<Sdk> | null = null;
  const log = core.log.child({ face: 'mcp' });

  await app.register(async (mcp) => {
    // The body is parsed here, not by the app's JSON parser: a parse error is JSON-RPC -32700.
    mcp.removeAllContentTypeParsers();
    mcp.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

    mcp.setErrorHandler((err: Error & { code?: string; statusCode?: number }, request, reply) => {
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return rpcError(reply, 413, RPC.invalidRequest, `Request body is larger than ${BODY_LIMIT / 1024} KiB`);
      const status = typeof err.statusCode === 'number' ? err.statusCode : 500;
      if (status >= 400 && status < 500) return rpcError(reply, 400, RPC.invalidRequest, `Invalid request: ${err.message}`);
      request.log.error({ err }, 'tool endpoint failed');
      return rpcError(reply, 500, RPC.internal, 'Internal error; retry with backoff');
    });

    // No event stream and no session to delete: only POST (spec: "GET returns 405").
    mcp.route({
      method: ['GET', 'DELETE', 'PUT', 'PATCH'],
      url: '/mcp',
      handler: (_request, reply) =>
        rpcError(reply.header('allow', 'POST, OPTIONS'), 405, RPC.server, 'Method not allowed: this endpoint answers JSON-RPC over POST only (no event stream, no session to delete)'),
    });

    mcp.post('/mcp', async (request, reply) => {
      // request.host is the Host header, or X-Forwarded-Host when EPHEMAIL_TRUST_PROXY is on
      if (!allowedHost(core, request.host)) {
        return rpcError(reply, 403, RPC.server, `Invalid Host header ${JSON.stringify(String(request.host ?? '').slice(0, 200))}: use the service's public host (EPHEMAIL_PUBLIC_URL) or a loopback name`);
      }
      if (!acceptsJson(header(request, 'accept'))) {
        return rpcError(reply, 406, RPC.server, 'Not Acceptable: this endpoint answers with application/json only; send Accept: application/json');
      }
      if (!/^application\/json\s*(?:;|$)/i.test(header(request, 'content-type') ?? '')) {
        return rpcError(reply, 415, RPC.server, 'Unsupported Media Type: send the JSON-RPC message as Content-Type: application/json');
      }
      let raw: unknown;
      try {
        raw = JSON.parse(typeof request.body === 'string' ? request.body : '');
      } catch {
        return rpcError(reply, 400, RPC.parseError, 'Parse error: the body is not valid JSON');
      }
      if (Array.isArray(raw)) return rpcError(reply, 400, RPC.invalidRequest, 'Invalid Request: batches are not supported; send one JSON-RPC message per request');
      // a failed import is retried by the next request (it fails this one with a 500)
      sdk ??= loadSdk().catch((err: unknown) => {
        sdk = null;
        throw err;
      });
      const { WebStandardStreamableHTTPServerTransport, isInitializeRequest, isJSONRPCRequest, JSONRPCMessageSchema, buildServer, limitError, PROTOCOL_VERSIONS, wireTools } = await sdk;
      const parsed = JSONRPCMessageSchema.safeParse(raw);
      if (!parsed.success) {
        const id = raw && typeof raw === 'object' && ['string', 'number'].includes(typeof (raw as { id?: unknown }).id) ? ((raw as { id: Id }).id) : null;
        return rpcError(reply, 400, RPC.invalidRequest, 'Invalid Request: not a JSON-RPC 2.0 request, notification or response', id);
      }
      const message: JSONRPCMessage = parsed.data;
      const initialize = isInitializeRequest(message);
      const version = header(request, 'mcp-protocol-version');
      if (!initialize && version !== undefined && !(PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
        return rpcError(reply, 400, RPC.server, `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(version.slice(0, 40))}; supported: ${PROTOCOL_VERSIONS.join(', ')}`);
      }

      // Who pays: initialize and requests without a valid session id are the IP's; a signed id is its
      // own bucket, and every session of one IP together is capped at SESSIONS_PER_IP_FACTOR times the
      // IP's quota (so minting sessions cannot multiply it without end).
      const now = core.clock.now();
      const session = initialize ? null : sessions.check(header(request, 'mcp-session-id'), now);
      if (session && 'expired' in session) {
        const id = 'id' in message && (typeof message.id === 'string' || typeof message.id === 'number') ? message.id : null;
        return rpcError(reply, 404, RPC.sessionExpired, `Session expired: Mcp-Session-Id values are valid for ${SESSION_LIFETIME_MS / 3_600_000} hours; send initialize again for a new one`, id);
      }
      const ip = ipBucket(request.ip);
      let bucket = session?.bucket ?? ip;
      const isRequest = isJSONRPCRequest(message);
      // without a session the IP pays, in its own bucket and its IPv6 /56 and /48 (hitClient)
      let limit = session
        ? isRequest ? await core.limiter.hit(bucket, core.config.anon, now) : await core.limiter.peek(bucket, core.config.anon, now)
        : await hitClient(core.limiter, request.ip, core.config.anon, now, isRequest);
      if (session && isRequest && limit.allowed) {
        const all = await hitClient(core.limiter, request.ip, sessionsCeiling(core.config.anon), now, true, 'mcp-sessions:');
        if (!all.allowed) {
          limit = all; // refused by the IP's ceiling: the message names it
          bucket = `mcp-sessions:${ip}`;
        }
      }
      reply.header('ratelimit-limit', String(limit.limit)).header('ratelimit-remaining', String(limit.remaining)).header('ratelimit-reset', String(limit.resetSeconds));

      const abort = new AbortController();
      const ctx = { core, bucket, signal: abort.signal, limit, reader: readerOf(request.ip) };
      if (!limit.allowed) {
        reply.header('retry-after', String(Math.max(1, limit.retryAfterSeconds)));
        // tools/call answers with an isError result (spec: rate limit is an actionable error)
        if (isRequest && message.method !== 'tools/call') {
          const e = limitError(ctx);
          return rpcError(reply, 429, RPC.server, `${e.message}. Retry after ${Math.max(1, limit.retryAfterSeconds)} s.`, message.id, { type: e.type, retry_after: Math.max(1, limit.retryAfterSeconds) });
        }
      }

      // a client that goes away ends a held check_inbox
      const onClose = () => { if (!reply.raw.writableEnded) abort.abort(); };
      reply.raw.on('close', onClose);
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const server = buildServer(ctx, wireTools);
      server.onerror = (err) => log.debug({ err }, 'mcp protocol error');
      try {
        await server.connect(transport);
        const headers: Record<string, string> = {
          // the SDK insists on both; a client that accepts JSON only is served all the same
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
        };
        if (version !== undefined) headers['mcp-protocol-version'] = version;
        const res = await transport.handleRequest(new Request(`${core.baseUrl()}/mcp`, { method: 'POST', headers }), { parsedBody: message });
        if (initialize && res.status === 200) reply.header('mcp-session-id', sessions.issue(now));
        reply.code(res.status);
        const type = res.headers.get('content-type');
        if (type) reply.type(type);
        const text = await res.text();
        return reply.send(text === '' ? undefined : text);
      } finally {
        reply.raw.off('close', onClose);
        await server.close().catch((err: unknown) => log.debug({ err }, 'closing the per-request server failed'));
      }
    });
  });
}
