// Operator endpoints outside the API and its quota: GET /livez (the process answers), GET /readyz
// (the store answers and SMTP listens: send traffic here), GET /metrics (Prometheus text; 404 when
// EPHEMAIL_METRICS=false), and the count of every HTTP request by matched route and status.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../services/core.ts';
import { appendRouteHook } from './plugins/route-hooks.ts';

const text = 'text/plain; charset=utf-8';

export function registerProbes(app: FastifyInstance, core: Core): void {
  const hide = { schema: { hide: true } };
  app.get('/livez', hide, async (_req, reply) => reply.type(text).header('cache-control', 'no-store').send('ok\n'));
  app.get('/readyz', hide, async (_req, reply) => {
    let store = true;
    try {
      await core.store.ping();
    } catch {
      store = false;
    }
    const smtp = core.smtpRunning();
    reply.code(store && smtp ? 200 : 503).type(text).header('cache-control', 'no-store');
    return `${store && smtp ? 'ready' : 'not ready'}\nstore: ${store ? 'ok' : 'unreachable'}\nsmtp: ${smtp ? 'listening' : 'stopped'}\n`;
  });
  const metrics = core.metrics;
  if (!metrics) return;
  app.get('/metrics', hide, async (_req, reply) =>
    reply.type(metrics.registry.contentType).header('cache-control', 'no-store').send(await metrics.registry.metrics()));
}

/**
 * Counts every request by method, route pattern (never the raw URL: bounded label values) and
 * status. Registered before the routes: each route gets its own hook with its pattern captured,
 * so no request reads its route options; requests that match no route count as `unmatched`.
 */
export function countRequests(app: FastifyInstance, core: Core): void {
  const metrics = core.metrics;
  if (!metrics) return;
  app.addHook('onRoute', (route) => {
    if (route.url === '/metrics') return;
    const count = metrics.httpRequestTally(route.url);
    const hook = (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      count(request.method, reply.statusCode);
      done();
    };
    appendRouteHook(route, 'onResponse', hook);
  });
  // a request that matched no route is a 404 of the not-found handler (its route options are read
  // only then)
  const unmatched = metrics.httpRequestTally('unmatched');
  app.addHook('onResponse', (request, reply, done) => {
    if (reply.statusCode === 404 && request.routeOptions.url === undefined) unmatched(request.method, 404);
    done();
  });
}
