// GET /api/v1/inboxes/{address}/events (http/events.ts): for a key, a stream that holds one of its
// wait slots; for the inbox page (the web caller, plugins/web-caller.ts), a stream without a key
// under the per-network caps the page has always had. Registered by inboxes.ts, in its place in
// the route table.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError } from '../../domain/errors.ts';
import { isUuid } from '../../domain/ids.ts';
import type { Core } from '../../services/core.ts';
import { resolveInbox } from '../../services/emails.ts';
import { withWaitSlot } from '../../services/wait.ts';
import { createEventStreams, EVENT_STREAM_LIFETIME_MS } from '../events.ts';
import { AddressParams, SECURITY, errors } from './shared.ts';

const EventsQuery = Type.Object({
  since: Type.Optional(Type.String({ description: 'An email id: replay the stored mail after it first (as Last-Event-ID does)' })),
});

type App = Parameters<FastifyPluginAsyncTypebox<{ core: Core }>>[0];

export function registerEventsRoute(app: App, core: Core, pageStreamMs?: number): void {
  const streams = createEventStreams(core, { pageLifetimeMs: pageStreamMs });
  app.addHook('preClose', async () => streams.closeAll());
  app.get('/api/v1/inboxes/:address/events', {
    schema: {
      operationId: 'streamEmails', tags: ['emails'], security: SECURITY, params: AddressParams, querystring: EventsQuery,
      summary: 'A Server-Sent Events stream of new mail: one `email` event per email (data: the summary; id: the email id), a `: heartbeat` comment every 15 s. Resumable: `Last-Event-ID` (or `since`) replays the mail after that id still stored, then goes live, with no gap and no duplicate. Needs a key; a stream holds one of the key\'s concurrent waits and ends after 10 minutes (EventSource reconnects by itself). Additive.',
      response: {
        200: { description: 'text/event-stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
        ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded', 'too_many_waiters'),
      },
    },
  }, async (request, reply) => {
    const c = request.caller;
    const page = c.kind === 'web'; // the inbox page's own stream (docs/web.md "Live mail")
    if (!page && (c.kind !== 'key' || !c.key)) throw new AppError('key_required', 'the event stream needs an API key: create one with POST /api/v1/keys and send it as Authorization: Bearer <key> or X-API-Key');
    const { address } = resolveInbox(core, request.params.address);
    const header = request.headers['last-event-id'];
    const since = (typeof header === 'string' && header !== '' ? header : request.query.since) ?? null;
    if (since !== null && !isUuid(since)) throw new AppError('invalid_request', `Last-Event-ID / since must be an email id (a UUID), got ${JSON.stringify(since.slice(0, 60))}`);
    // HEAD answers at once: nothing to stream
    if (request.method === 'HEAD') return reply.type('text/event-stream').header('cache-control', 'no-store').send();
    if (page) {
      if (!streams.openPage(request, reply, address, since?.toLowerCase() ?? null)) {
        throw new AppError('too_many_waiters', 'Too many open inbox pages from your network; retry shortly', { retryAfter: 10 });
      }
      return reply;
    }
    // the node's own bound: as many API event streams as held waits (EPHEMAIL_MAX_HELD_WAITS), counted apart
    if (streams.size >= core.config.maxHeldWaits) {
      throw new AppError('too_many_waiters', `This node already holds its maximum of ${core.config.maxHeldWaits} event streams; retry shortly`, { retryAfter: 1 });
    }
    // the slot is the stream's for its lifetime: released when the stream closes, not when this returns
    const refusal = `This key already holds ${c.concurrentWaits} waiting requests or streams; close one first`;
    await withWaitSlot(core.limiter, core.clock, { bucket: c.bucket, max: c.concurrentWaits, refusal }, EVENT_STREAM_LIFETIME_MS, async (release) => {
      streams.open(request, reply, address, since?.toLowerCase() ?? null, release);
    }, { keepAfterRun: true });
    return reply;
  });
}
