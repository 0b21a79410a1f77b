// A webhook receiver on loopback (a real HTTP server): records every call with its headers and body,
// and answers with the status its `answer` function picks (500 for the first calls, say).
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { until } from './time.ts';

export interface Call {
  /** The request's path and query (which webhook called, when several share a receiver). */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  calls: Call[];
  /** TCP connections accepted so far (a refused address must never open one). */
  connections: number;
  /** TCP connections open now (a sender's kept-alive ones included). */
  open: number;
  /** Picks the status of call n (0-based); 0 leaves the call unanswered (a hung receiver). */
  answer: (n: number, call: Call) => number;
  /** Resolves once `n` calls have arrived (rejects after `ms`). */
  until(n: number, ms?: number): Promise<Call[]>;
  close(): Promise<void>;
}

/** `keepAliveMs`: how long the receiver keeps an idle connection open (Node's 5 s by default). */
export async function startReceiver(answer: (n: number, call: Call) => number = () => 200, port = 0, keepAliveMs?: number): Promise<Receiver> {
  const r: Receiver = {
    url: '',
    port: 0,
    calls: [],
    connections: 0,
    open: 0,
    answer,
    async until(n, ms = 10_000) {
      await until(() => r.calls.length >= n, `the receiver got ${n} calls`, ms);
      return r.calls;
    },
    close: () => new Promise<void>((res) => {
      server.closeAllConnections();
      server.close(() => res());
    }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const call: Call = { url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      const status = r.answer(r.calls.length, call);
      r.calls.push(call);
      if (status === 0) return;
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
    });
  });
  if (keepAliveMs !== undefined) server.keepAliveTimeout = keepAliveMs;
  server.on('connection', (socket) => {
    r.connections++;
    r.open++;
    socket.on('close', () => r.open--);
  });
  await new Promise<void>((res) => server.listen(port, '127.0.0.1', () => res()));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}/hook`;
  return r;
}
