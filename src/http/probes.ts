// Operator endpoints outside the API and its quota: GET /livez (the process answers), GET /readyz
// (the store answers and SMTP listens: send traffic here), GET /metrics (Prometheus text; 404 when
// EPHEMAIL_METRICS=false), and the count of every HTTP request by matched route and status.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../services/core.ts';

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
  app.addHook('onResponse', (request, reply, done) => {
    // the route pattern, never the raw URL: bounded label values
    const route = request.routeOptions.url ?? 'unmatched';
    if (route !== '/metrics') metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    done();
  });
}
