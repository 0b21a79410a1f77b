// buildApp(): the HTTP face (API, docs, tool endpoint, web pages) without listen(), so tests use inject().
import { Ajv } from 'ajv';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { isIP } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { AppError } from '../domain/errors.ts';
import { ipRangeMatcher } from '../domain/ip-ranges.ts';
import { BODY_LIMIT } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import { registerDocs } from './docs.ts';
import { registerOpenApi } from './openapi.ts';
import { registerProviders } from './providers/index.ts';
import { lazyRequestLogger } from './request-log.ts';
import { registerCaller, setLimitHeaders } from './plugins/caller.ts';
import { registerCors } from './plugins/cors.ts';
import { appendRouteHook } from './plugins/route-hooks.ts';
import { hitClient } from '../limiter/limiter.ts';
import { envelope, registerErrorHandling, registerUrlGuard, sendError, toAppError } from './plugins/errors.ts';
import { countRequests, registerProbes } from './probes.ts';
import { closeIdleSockets } from './idle-sockets.ts';
import { registerRoutes } from './routes/index.ts';
import { SECURITY, errors } from './routes/shared.ts';
import { SHARED_SCHEMAS } from './schemas/wire.ts';

/** Fastify's trust function: hop 0 (the direct peer) when it is in the configured ranges, never further. */
function trustedHop(ranges: false | readonly string[]): false | ((address: string, hop: number) => boolean) {
  if (!ranges) return false;
  const trusted = ipRangeMatcher(ranges);
  return (address, hop) => hop === 0 && trusted(address);
}

declare module 'fastify' {
  interface FastifyInstance {
    endpointList: { method: string; path: string; summary: string }[];
  }
}

/** Extra faces mounted on the same app (the tool endpoint, the web pages), registered by assemble.ts. */
export type Mount = (app: FastifyInstance, core: Core) => Promise<void> | void;

/** How long a client may take: the defaults serve everyone; tests pass short ones to see them act. */
export interface HttpTimeouts {
  /** The request line and headers must arrive within this (slowloris). */
  headersMs: number;
  /** A whole request, body included (above the 30 s wait). */
  requestMs: number;
  /** A socket that sends and receives nothing for this long is closed. */
  idleMs: number;
  /** How often Node looks for requests past headersMs/requestMs, and idle sockets are looked for. */
  checkEveryMs: number;
  /** How long an inbox page's event stream lives before the page reconnects (default 5 minutes). */
  pageStreamMs?: number;
}
export const HTTP_TIMEOUTS: HttpTimeouts = Object.freeze({ headersMs: 30_000, requestMs: 120_000, idleMs: 130_000, checkEveryMs: 5_000 });

/**
 * Request validation, one Ajv pass per part: the query string and path are text, so their types are
 * coerced ("25" is 25); a JSON body is checked strictly ({"label": 5} is a wrong type, not "5", and an
 * unknown field is an error, never silently dropped). String lengths count characters (code points),
 * as JSON Schema says. Fastify calls this for every encapsulation context, with that context's schemas.
 */
function validators() {
  const ajvOptions = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false } as const;
  // one pair for the whole app (each new Ajv compiles the draft-07 meta-schema again: two per
  // encapsulation context were ~2/3 of a start's CPU); a context's shared schemas are added once by $id
  const coercing = new Ajv({ ...ajvOptions, coerceTypes: true });
  const strict = new Ajv({ ...ajvOptions, coerceTypes: false });
  const added = new Set<string>(); // not ajv.getSchema(id): that compiles the schema
  return (externalSchemas: unknown) => {
    for (const schema of Object.values((externalSchemas ?? {}) as Record<string, { $id?: string }>)) {
      if (schema.$id !== undefined) {
        if (added.has(schema.$id)) continue;
        added.add(schema.$id);
      }
      coercing.addSchema(schema);
      strict.addSchema(schema);
    }
    return ({ schema, httpPart }: { schema: object; httpPart?: string }) => lazyValidator(() => (httpPart === 'body' ? strict : coercing).compile(schema));
  };
}

/**
 * Validators and serializers are compiled when a route first needs them, not at start: Fastify
 * compiles every route's schemas (Ajv per request part, fast-json-stringify per response status) at
 * ready(), and their code is ~11 MB of the idle process (docs/architecture.md "Memory"). Most
 * instances never call most routes (admin, providers, faults). The first call of a route pays its
 * compile once (a few ms); a schema that does not compile would fail that route's first call, and
 * test/http/response-schemas.test.ts calls every operation.
 */
type Check = ((data: unknown) => boolean) & { errors?: unknown };
function lazyValidator(compile: () => Check): Check {
  let fn: Check | undefined;
  const check: Check = (data) => {
    fn ??= compile();
    const ok = fn(data);
    check.errors = fn.errors;
    return ok;
  };
  return check;
}

/** fast-json-stringify, Fastify's own serializer compiler, built on first use of each route and status. */
function lazySerializers() {
  const select = SerializerSelector();
  return (externalSchemas: unknown, options: unknown) => {
    const build = select(externalSchemas as never, options as never);
    return (route: unknown) => {
      let fn: ((data: unknown) => string) | undefined;
      return (data: unknown) => (fn ??= build(route as never))(data);
    };
  };
}

export async function buildApp(core: Core, mounts: Mount[] = [], timeouts: HttpTimeouts = HTTP_TIMEOUTS): Promise<FastifyInstance> {
  const app = Fastify({
    // the request line and headers must arrive within headersMs (Node's default is 60 s), checked every checkEveryMs
    http: { headersTimeout: timeouts.headersMs, connectionsCheckingInterval: timeouts.checkEveryMs },
    loggerInstance: core.log as unknown as FastifyBaseLogger,
    // each request's logger is made when it first logs (request-log.ts)
    childLoggerFactory: lazyRequestLogger,
    // one trusted hop, and only a peer in the configured ranges (the load balancer): the client is
    // the address that proxy appended last, so a client cannot pick its own bucket by sending an
    // X-Forwarded-For of its own, nor by connecting directly
    trustProxy: trustedHop(core.config.trustProxy),
    bodyLimit: BODY_LIMIT,
    requestTimeout: timeouts.requestMs, // above the 30 s wait
    keepAliveTimeout: 65_000,
    // (no connectionTimeout: idle sockets are swept below, without a timer moved per read and write)
    return503OnClosing: false,
    logController: new LogController({ disableRequestLogging: true }), // per-request lines cost throughput; errors are still logged
    // one validation, by Ajv, per part (validators below); given as the compilers' factory, not
    // setValidatorCompiler, so that a route plugin adding schemas of its own keeps these rules
    // (Fastify's typings describe the compiler as Ajv's compile(schema); it is called with the route's
    // { schema, httpPart, ... }, as its documentation shows: hence the one cast)
    schemaController: { compilersFactory: { buildValidator: validators() as never, buildSerializer: lazySerializers() as never } },
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 1000 },
    // requests Node's parser refuses (headers over its 16 KiB limit, bytes that are not HTTP) get the envelope
    clientErrorHandler: (err: NodeJS.ErrnoException, socket) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const message = err.code === 'HPE_HEADER_OVERFLOW'
        ? 'The request line and headers are larger than 16 KiB'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'The request was not received in time' : 'The request is not well-formed HTTP/1.1';
      const body = JSON.stringify(envelope(core, 'invalid_request', message));
      if (!socket.writable) return void socket.destroy();
      socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      setTimeout(() => socket.destroy(), 2000).unref();
    },
    // errors Fastify raises before routing (a path that is not valid percent-encoding) get the envelope too
    frameworkErrors: (err, request, reply) => {
      // these never reach the onRequest hooks: report the IP's bucket as it stands (not counted)
      hitClient(core.limiter, request.ip, core.config.anon, core.clock.now(), false).then(
        (r) => setLimitHeaders(reply, r),
        () => undefined,
      ).finally(() => sendError(core, reply, toAppError(err)));
    },
  });

  // a socket that sends and receives nothing for idleMs is closed (slowloris, a stalled download;
  // held waits are at most 30 s, event streams send a heartbeat every 15 s): one sweep every
  // checkEveryMs (idle-sockets.ts; it stops with the server)
  closeIdleSockets(app.server, timeouts.idleMs, timeouts.checkEveryMs);

  app.decorate('endpointList', [] as FastifyInstance['endpointList']);
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/api/v1') || route.method === 'HEAD' || route.schema?.hide) return;
    for (const m of [route.method].flat()) {
      if (m !== 'HEAD') app.endpointList.push({ method: m, path: route.url.replace(/:([a-z_]+)/g, '{$1}'), summary: String(route.schema?.summary ?? '') });
    }
  });

  // JSON bodies: an empty body counts as absent (POST /inboxes and /keys take an optional body).
  app.removeContentTypeParser('application/json');
  // (matched on the media type alone: `application/json; charset=utf-8` is JSON too)
  app.addContentTypeParser(/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i, { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new SyntaxError('Request body is not valid JSON'), { statusCode: 400 }), undefined);
    }
  });

  // a trusted proxy must name the client with an IP address: anything else is its misconfiguration
  if (core.config.trustProxy) {
    app.addHook('onRequest', (request, _reply, done) => {
      done(isIP(request.ip) ? undefined : new AppError('invalid_request', 'X-Forwarded-For from the trusted proxy does not end in an IP address'));
    });
  }

  // any origin, rate-limit headers exposed, preflights answered first (plugins/cors.ts)
  registerCors(app);
  // An absent body is an empty object: POST /inboxes and /keys take an optional body.
  // (callback-style, as every hook on the request path: an async hook costs a promise per request;
  // on the routes that take a body only)
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().some((m) => m === 'POST' || m === 'DELETE')) return;
    appendRouteHook(route, 'preValidation', (request, _reply, done) => {
      if (request.body === undefined) request.body = {};
      done();
    });
  });
  for (const s of SHARED_SCHEMAS) app.addSchema(s);
  await registerOpenApi(app, core);
  registerErrorHandling(app, core);
  countRequests(app, core);
  registerCaller(app, core);
  registerUrlGuard(app);
  await registerRoutes(app, core, timeouts.pageStreamMs);
  registerProbes(app, core);
  app.get('/api/v1/openapi.json', {
    config: { quota: 'peek' },
    schema: {
      operationId: 'openapi', tags: ['service'], summary: 'This machine-readable contract (OpenAPI 3.1). Outside the quota.',
      security: SECURITY,
      response: { 200: { type: 'object', additionalProperties: true, description: 'The OpenAPI document' }, ...errors('unauthorized') },
    },
  }, async () => app.swagger());
  registerDocs(app, core);
  // the provider API emulations (SendGrid, SES, Postmark, Resend, Mailgun): their own parsers, limits, errors
  await registerProviders(app, core);
  for (const mount of mounts) await mount(app, core);
  return app;
}

