// The TCP front both mail-access listeners share: SMTP's PROXY-protocol setting
// (EPHEMAIL_SMTP_PROXY_PROTOCOL: the balancers' addresses) covers them too, so behind a TCP balancer
// a session is counted and limited by its client's address, not the balancer's.
import { createServer, type Server, type Socket } from 'node:net';
import { ipRangeMatcher } from '../domain/ip-ranges.ts';
import type { Core } from '../services/core.ts';
import { installProxyFront } from '../smtp/proxy-protocol.ts';

/** A listener calling `accept` with each connection and its client's address (the PROXY header's, when its peer is a trusted balancer). */
export function mailFront(core: Core, protocol: 'imap' | 'pop3', maxPending: number, accept: (socket: Socket, ip: string) => void): { server: Server; close(): void } {
  const server = createServer({ noDelay: true });
  server.on('error', (err) => core.log.warn({ err }, `${protocol} listener error`));
  const direct = (socket: Socket) => accept(socket, socket.remoteAddress ?? '0.0.0.0');
  if (core.config.smtpProxyProtocol.length === 0) {
    server.on('connection', direct);
    return { server, close: () => undefined };
  }
  const front = installProxyFront(server, {
    trusted: ipRangeMatcher(core.config.smtpProxyProtocol),
    headerMs: 5_000,
    maxPending,
    accept: (socket, client) => accept(socket, client?.address ?? socket.remoteAddress ?? '0.0.0.0'),
    acceptDirect: direct,
    refused: (peer, reason) => core.log.warn({ peer, reason }, `${protocol.toUpperCase()} connection refused: PROXY protocol header`),
  });
  return { server, close: () => front.close() };
}
