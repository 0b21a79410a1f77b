// GET /api/v1/inboxes/{address}/events: a resumable Server-Sent Events stream of new mail, one
// `email` event per email (the summary, its id as the SSE id). `Last-Event-ID` (or `?since=`)
// replays the mail after that id that is still stored, then goes live, with no gap and no duplicate
// at the seam (services/stream.ts). A stream holds one of its key's wait slots for its lifetime.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../services/core.ts';
import { followInbox } from '../services/stream.ts';
import { toWireSummary } from './schemas/wire.ts';

/** A stream ends after this long; EventSource reconnects with Last-Event-ID and loses nothing. */
export const EVENT_STREAM_LIFETIME_MS = 10 * 60_000;
export const EVENT_HEARTBEAT_MS = 15_000;
/** A reader that lets this much unsent data pile up is dropped (it resumes with Last-Event-ID). */
export const EVENT_MAX_BUFFERED_BYTES = 1024 * 1024;
const RETRY_MS = 1000;

export interface EventStreams {
  /** Starts the stream on a request that passed its checks; `release` frees its wait slot. */
  open(request: FastifyRequest, reply: FastifyReply, address: string, since: string | null, release: () => Promise<void>): void;
  closeAll(): void;
  readonly size: number;
}

export function createEventStreams(core: Core, options: { lifetimeMs?: number; heartbeatMs?: number; maxBufferedBytes?: number } = {}): EventStreams {
  const lifetimeMs = options.lifetimeMs ?? EVENT_STREAM_LIFETIME_MS;
  const heartbeatMs = options.heartbeatMs ?? EVENT_HEARTBEAT_MS;
  const maxBuffered = options.maxBufferedBytes ?? EVENT_MAX_BUFFERED_BYTES;
  const closers = new Set<() => void>();
  return {
    get size() {
      return closers.size;
    },
    closeAll() {
      for (const c of [...closers]) c();
    },
    open(request, reply, address, since, release) {
      const res = reply.raw;
      reply.hijack();
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        'x-content-type-options': 'nosniff',
        connection: 'keep-alive',
        ...Object.fromEntries(Object.entries(reply.getHeaders()).filter(([k]) => k.startsWith('ratelimit') || k.startsWith('access-control'))),
      });
      let closed = false;
      const write = (chunk: string) => {
        if (closed) return;
        res.write(chunk);
        if (res.writableLength > maxBuffered) close(); // a slow reader: dropped, it resumes later
      };
      const follower = followInbox(core, address, {
        since,
        deliver(emails) {
          for (const e of emails) write(`id: ${e.id}\nevent: email\ndata: ${JSON.stringify(toWireSummary(e))}\n\n`);
        },
        onError(err) {
          core.log.warn({ err }, 'event stream read failed; reading again on the next delivery');
        },
      });
      const heartbeat = setInterval(() => write(': heartbeat\n\n'), heartbeatMs);
      const lifetime = setTimeout(() => close(), lifetimeMs);
      heartbeat.unref();
      lifetime.unref();
      const close = () => {
        if (closed) return;
        closed = true;
        follower.close();
        clearInterval(heartbeat);
        clearTimeout(lifetime);
        closers.delete(close);
        res.end();
        release().catch((err) => core.log.warn({ err }, 'event stream: wait slot release failed'));
      };
      closers.add(close);
      request.raw.on('close', close);
      res.on('close', close);
      res.on('error', close);
      write(`retry: ${RETRY_MS}\n: streaming new mail of ${address}\n\n`);
    },
  };
}
