// One Server-Sent Events connection, as both streams use it (the API's /events and the inbox page's
// live list): headers, a heartbeat comment, a lifetime after which the client reconnects, a bound on
// unsent data (a reader that does not read is dropped: it resumes), and one close path.
import type { FastifyReply, FastifyRequest } from 'fastify';

export interface SseOptions {
  lifetimeMs: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  /** Sent once at the start: `retry:` in ms (how soon EventSource reconnects). */
  retryMs: number;
  /** Extra response headers (rate-limit headers of the request). */
  headers?: Record<string, string>;
  /** Called once when the stream ends, however it ends. */
  onClose(): void;
}

export interface SseStream {
  /** An event; `id` becomes the SSE id (what Last-Event-ID resumes from). */
  send(event: string, data: unknown, id?: string): void;
  comment(text: string): void;
  close(): void;
  readonly closed: boolean;
}

export function openSse(request: FastifyRequest, reply: FastifyReply, options: SseOptions): SseStream {
  const res = reply.raw;
  reply.hijack();
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'x-content-type-options': 'nosniff',
    connection: 'keep-alive',
    ...options.headers,
  });
  res.flushHeaders();
  let closed = false;
  const write = (chunk: string) => {
    if (closed) return;
    res.write(chunk);
    if (res.writableLength > options.maxBufferedBytes) close();
  };
  const heartbeat = setInterval(() => write(': heartbeat\n\n'), options.heartbeatMs);
  const lifetime = setTimeout(() => close(), options.lifetimeMs);
  heartbeat.unref();
  lifetime.unref();
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    clearTimeout(lifetime);
    res.end();
    options.onClose();
  };
  request.raw.on('close', close);
  res.on('close', close);
  res.on('error', close);
  write(`retry: ${options.retryMs}\n\n`);
  return {
    send: (event, data, id) => write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    close,
    get closed() {
      return closed;
    },
  };
}
