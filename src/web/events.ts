// The inbox page's live feed: one Server-Sent Events stream per open page. It subscribes to the bus
// before its first query (no delivery slips between the two, as in services/wait.ts), sends the
// current list as `snapshot`, then each new email as `mail`. Streams live STREAM_LIFETIME_MS and
// the browser's EventSource reconnects (a fresh snapshot each time), so no stream is held forever;
// a comment line every HEARTBEAT_MS keeps proxies from timing out an idle stream.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toWireSummary } from '../http/schemas/wire.ts';
import type { Core } from '../services/core.ts';
import type { EmailSummary } from '../store/store.ts';
import { createHoldCounter } from '../domain/limits.ts';
import { STREAM_CAPS, STREAMS_TOTAL } from './security.ts';

export const STREAM_LIFETIME_MS = 5 * 60_000;
/** Unsent bytes a stream may pile up before it is dropped. */
export const STREAM_MAX_BUFFERED_BYTES = 1024 * 1024;
export const HEARTBEAT_MS = 15_000;
const RETRY_MS = 500;
const SNAPSHOT_LIMIT = 100;

export interface StreamHub {
  /** Opens a stream for `address` (normalised); false when the caps say no (the caller answers 429). */
  open(core: Core, request: FastifyRequest, reply: FastifyReply, address: string, ip: string): boolean;
  /** Ends every stream (shutdown). */
  closeAll(): void;
  readonly size: number;
}

export function createStreamHub(options: { lifetimeMs?: number; heartbeatMs?: number } = {}): StreamHub {
  const lifetimeMs = options.lifetimeMs ?? STREAM_LIFETIME_MS;
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const perClient = createHoldCounter(STREAM_CAPS);
  const closers = new Set<() => void>();

  return {
    get size() {
      return closers.size;
    },
    closeAll() {
      for (const close of [...closers]) close();
    },
    open(core, request, reply, address, ip) {
      if (closers.size >= STREAMS_TOTAL) return false;
      const release = perClient.take(ip);
      if (!release) return false;

      const res = reply.raw;
      reply.hijack();
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        'x-content-type-options': 'nosniff',
        connection: 'keep-alive',
      });
      res.flushHeaders();

      let closed = false;
      let lastId: string | null = null;
      let querying = false;
      let again = false;
      const send = (event: string, data: unknown, id?: string) => {
        if (closed) return;
        res.write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
        if (res.writableLength > STREAM_MAX_BUFFERED_BYTES) close(); // a reader that does not read: dropped (the page reconnects)
      };

      const pull = async () => {
        if (querying) {
          again = true;
          return;
        }
        querying = true;
        try {
          do {
            again = false;
            const now = core.clock.now();
            let fresh: EmailSummary[];
            if (lastId) fresh = await core.store.listEmails(address, { limit: SNAPSHOT_LIMIT, since: lastId }, now);
            else fresh = (await core.store.listEmails(address, { limit: SNAPSHOT_LIMIT }, now)).reverse();
            if (closed || fresh.length === 0) continue;
            lastId = fresh[fresh.length - 1].id;
            send('mail', { emails: fresh.map(toWireSummary) }, lastId);
          } while (again && !closed);
        } catch (err) {
          core.log.warn({ err }, 'web stream query failed');
        } finally {
          querying = false;
        }
      };

      const unsubscribe = core.bus.subscribe(address, () => void pull());
      const heartbeat = setInterval(() => !closed && res.write(': ping\n\n'), heartbeatMs);
      const lifetime = setTimeout(() => close(), lifetimeMs);
      heartbeat.unref();
      lifetime.unref();

      const close = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        clearInterval(heartbeat);
        clearTimeout(lifetime);
        closers.delete(close);
        release();
        res.end();
      };
      closers.add(close);
      request.raw.on('close', close);
      res.on('close', close);
      res.on('error', close);

      res.write(`retry: ${RETRY_MS}\n\n`);
      querying = true;
      core.store
        .listEmails(address, { limit: SNAPSHOT_LIMIT }, core.clock.now())
        .then((emails) => {
          lastId = emails[0]?.id ?? null;
          send('snapshot', { address, emails: emails.map(toWireSummary), now: new Date(core.clock.now()).toISOString() }, lastId ?? undefined);
        })
        .catch((err) => {
          core.log.warn({ err }, 'web stream snapshot failed');
          send('failure', { message: 'The inbox could not be read; retrying' });
          close();
        })
        .finally(() => {
          querying = false;
          if (again && !closed) void pull();
        });
      return true;
    },
  };
}
