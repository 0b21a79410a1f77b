// The inbox page's live feed: one Server-Sent Events stream per open page, on the same mechanism as
// the API's event stream (http/sse.ts for the connection, services/stream.ts for following the
// inbox). It sends the current list as `snapshot`, then new mail as `mail`, with no gap between the
// two. Streams live STREAM_LIFETIME_MS and the browser's EventSource reconnects (a fresh snapshot).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createHoldCounter } from '../domain/limits.ts';
import { toWireSummary } from '../http/schemas/wire.ts';
import { openSse } from '../http/sse.ts';
import type { Core } from '../services/core.ts';
import { followInbox, type InboxFollower } from '../services/stream.ts';
import { STREAM_CAPS, STREAMS_TOTAL } from './security.ts';

export const STREAM_LIFETIME_MS = 5 * 60_000;
/** Unsent bytes a stream may pile up before it is dropped. */
export const STREAM_MAX_BUFFERED_BYTES = 1024 * 1024;
export const HEARTBEAT_MS = 15_000;
const RETRY_MS = 500;
const SNAPSHOT_LIMIT = 100;
const FIRST_ID = '00000000-0000-7000-8000-000000000000';

export interface StreamHub {
  /** Opens a stream for `address` (normalised); false when the caps say no (the caller answers 429). */
  open(core: Core, request: FastifyRequest, reply: FastifyReply, address: string, ip: string): boolean;
  /** Ends every stream (shutdown). */
  closeAll(): void;
  readonly size: number;
}

export function createStreamHub(options: { lifetimeMs?: number; heartbeatMs?: number } = {}): StreamHub {
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
      let follower: InboxFollower | null = null;
      const sse = openSse(request, reply, {
        lifetimeMs: options.lifetimeMs ?? STREAM_LIFETIME_MS,
        heartbeatMs: options.heartbeatMs ?? HEARTBEAT_MS,
        maxBufferedBytes: STREAM_MAX_BUFFERED_BYTES,
        retryMs: RETRY_MS,
        onClose() {
          follower?.close();
          closers.delete(sse.close);
          release();
        },
      });
      closers.add(sse.close);
      core.store.listEmails(address, { limit: SNAPSHOT_LIMIT }, core.clock.now()).then(
        (emails) => {
          if (sse.closed) return;
          const newest = emails[0]?.id;
          sse.send('snapshot', { address, emails: emails.map(toWireSummary), now: new Date(core.clock.now()).toISOString() }, newest);
          // from the snapshot's newest on: what arrived while it was read is the first `mail`
          follower = followInbox(core, address, {
            since: newest ?? FIRST_ID,
            deliver: (fresh) => sse.send('mail', { emails: fresh.map(toWireSummary) }, fresh[fresh.length - 1].id),
            onError: (err) => core.log.warn({ err }, 'web stream query failed'),
          });
        },
        (err) => {
          core.log.warn({ err }, 'web stream snapshot failed');
          sse.send('failure', { message: 'The inbox could not be read; retrying' });
          sse.close();
        },
      );
      return true;
    },
  };
}
