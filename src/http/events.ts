// GET /api/v1/inboxes/{address}/events: a resumable Server-Sent Events stream of new mail, one
// `email` event per email (the summary, its id as the SSE id). `Last-Event-ID` (or `?since=`)
// replays the mail after that id that is still stored, then goes live, with no gap and no duplicate
// at the seam (services/stream.ts). A stream holds one of its key's wait slots for its lifetime.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../services/core.ts';
import { followInbox } from '../services/stream.ts';
import { toWireSummary } from './schemas/wire.ts';
import { openSse } from './sse.ts';

/** A stream ends after this long; EventSource reconnects with Last-Event-ID and loses nothing. */
export const EVENT_STREAM_LIFETIME_MS = 10 * 60_000;
export const EVENT_HEARTBEAT_MS = 15_000;
/** A reader that lets this much unsent data pile up is dropped (it resumes with Last-Event-ID). */
export const EVENT_MAX_BUFFERED_BYTES = 1024 * 1024;

export interface EventStreams {
  /** Starts the stream on a request that passed its checks; `release` frees its wait slot. */
  open(request: FastifyRequest, reply: FastifyReply, address: string, since: string | null, release: () => Promise<void>): void;
  closeAll(): void;
  readonly size: number;
}

export function createEventStreams(core: Core): EventStreams {
  const closers = new Set<() => void>();
  return {
    get size() {
      return closers.size;
    },
    closeAll() {
      for (const c of [...closers]) c();
    },
    open(request, reply, address, since, release) {
      let follower: { close(): void } | null = null;
      const headers = Object.fromEntries(Object.entries(reply.getHeaders()).filter(([k]) => k.startsWith('ratelimit') || k.startsWith('access-control')).map(([k, v]) => [k, String(v)]));
      const sse = openSse(request, reply, {
        lifetimeMs: EVENT_STREAM_LIFETIME_MS,
        heartbeatMs: EVENT_HEARTBEAT_MS,
        maxBufferedBytes: EVENT_MAX_BUFFERED_BYTES,
        retryMs: 1000,
        headers,
        onClose() {
          follower?.close();
          closers.delete(sse.close);
          release().catch((err) => core.log.warn({ err }, 'event stream: wait slot release failed'));
        },
      });
      closers.add(sse.close);
      follower = followInbox(core, address, {
        since,
        // the opening comment goes out once the "from now" cursor is fixed: a client that has read
        // it misses no later mail (docs/push.md)
        onReady: () => sse.comment(`streaming new mail of ${address}`),
        deliver: (emails) => {
          for (const e of emails) sse.send('email', toWireSummary(e), e.id);
        },
        onError: (err) => core.log.warn({ err }, 'event stream read failed; reading again on the next delivery'),
      });
      if (sse.closed) follower.close();
    },
  };
}
