// GET /api/v1/inboxes/{address}/events: a resumable Server-Sent Events stream of new mail, one
// `email` event per email (the summary, its id as the SSE id). `Last-Event-ID` (or `?since=`)
// replays the mail after that id that is still stored, then goes live, with no gap and no duplicate
// at the seam (services/stream.ts). The one hub of event streams: a key's streams (each holds one of
// its wait slots for its lifetime) and the inbox pages' streams (the web caller: per-network caps
// instead of wait slots, a shorter life), counted apart.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createHoldCounter } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import { followInbox } from '../services/stream.ts';
import { PAGE_STREAM_LIFETIME_MS, STREAM_CAPS, STREAMS_TOTAL } from './plugins/web-caller.ts';
import { toWireSummary } from './schemas/wire.ts';
import { openSse } from './sse.ts';

/** A stream ends after this long; EventSource reconnects with Last-Event-ID and loses nothing. */
export const EVENT_STREAM_LIFETIME_MS = 10 * 60_000;
export const EVENT_HEARTBEAT_MS = 15_000;
/** A reader that lets this much unsent data pile up is dropped (it resumes with Last-Event-ID). */
export const EVENT_MAX_BUFFERED_BYTES = 1024 * 1024;

export interface EventStreams {
  /** Starts a key's stream on a request that passed its checks; `release` frees its wait slot. */
  open(request: FastifyRequest, reply: FastifyReply, address: string, since: string | null, release: () => Promise<void>): void;
  /** Starts an inbox page's stream; false when its network (or the process) holds its cap (the caller answers 429). */
  openPage(request: FastifyRequest, reply: FastifyReply, address: string, since: string | null): boolean;
  closeAll(): void;
  /** Key streams open (the node's bound: EPHEMAIL_MAX_HELD_WAITS). */
  readonly size: number;
  readonly pageSize: number;
}

export interface EventStreamOptions {
  /** How long a page's stream lives (tests shorten it). */
  pageLifetimeMs?: number;
}

export function createEventStreams(core: Core, options: EventStreamOptions = {}): EventStreams {
  const closers = new Set<() => void>();
  const pageClosers = new Set<() => void>();
  const pageHolds = createHoldCounter(STREAM_CAPS);

  const start = (request: FastifyRequest, reply: FastifyReply, address: string, since: string | null, own: Set<() => void>, life: { lifetimeMs: number; retryMs: number }, release: () => void) => {
    let follower: { close(): void } | null = null;
    const headers = Object.fromEntries(Object.entries(reply.getHeaders()).filter(([k]) => k.startsWith('ratelimit') || k.startsWith('access-control')).map(([k, v]) => [k, String(v)]));
    const sse = openSse(request, reply, {
      ...life,
      heartbeatMs: EVENT_HEARTBEAT_MS,
      maxBufferedBytes: EVENT_MAX_BUFFERED_BYTES,
      headers,
      onClose() {
        follower?.close();
        own.delete(sse.close);
        release();
      },
    });
    own.add(sse.close);
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
  };

  return {
    get size() {
      return closers.size;
    },
    get pageSize() {
      return pageClosers.size;
    },
    closeAll() {
      for (const c of [...closers, ...pageClosers]) c();
    },
    open(request, reply, address, since, release) {
      const free = () => void release().catch((err) => core.log.warn({ err }, 'event stream: wait slot release failed'));
      start(request, reply, address, since, closers, { lifetimeMs: EVENT_STREAM_LIFETIME_MS, retryMs: 1000 }, free);
    },
    openPage(request, reply, address, since) {
      if (pageClosers.size >= STREAMS_TOTAL) return false;
      const release = pageHolds.take(request.ip);
      if (!release) return false;
      start(request, reply, address, since, pageClosers, { lifetimeMs: options.pageLifetimeMs ?? PAGE_STREAM_LIFETIME_MS, retryMs: 500 }, release);
      return true;
    },
  };
}
