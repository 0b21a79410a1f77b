// Connection policy: who may hold a connection (at most so many per client and per network, all
// clients together), the socket each session reads from, and the whole-session deadline.
import type { Socket } from 'node:net';
import type { SMTPServerSession } from 'smtp-server';
import { createHoldCounter } from '../domain/limits.ts';
import { smtpError, wrapSend, type SmtpError } from './replies.ts';
import type { Connection, OpenConnection, Tracked } from './session.ts';

/** Connection limits of the receiver (docs/security.md, "Limits"). Tests shorten them. */
export interface SmtpLimits {
  /** Connections open at once, all clients together; the next one gets 421. */
  maxClients: number;
  /** Connections open at once from one client (IPv4 address or IPv6 /64); the next one gets 421. */
  maxPerIp: number;
  /** Connections open at once from one IPv6 /56, and from one /48 (one site holds many /64s). */
  maxPer56: number;
  maxPer48: number;
  /** Whole-session deadline: a 421 closes the connection however busy the client keeps it. */
  sessionMs: number;
  /** Idle timeout while the client owes input (smtp-server socketTimeout); 421 after it. */
  idleMs: number;
  /** With EPHEMAIL_SMTP_PROXY_PROTOCOL: how long a balancer may take to send its header; 421 after it. */
  proxyHeaderMs: number;
  /**
   * The minimum DATA rate: a session in DATA that sends fewer than `dataRateMinBytes` in any window
   * of `dataRateWindowMs` (counted from the 354) gets `421 4.4.2` and is closed, and what it held
   * of the in-flight budget is free at once.
   */
  dataRateMinBytes: number;
  dataRateWindowMs: number;
}

export const DEFAULT_SMTP_LIMITS: Readonly<SmtpLimits> = Object.freeze({
  maxClients: 1000,
  maxPerIp: 25,
  maxPer56: 50,
  maxPer48: 100,
  sessionMs: 10 * 60_000,
  idleMs: 60_000,
  proxyHeaderMs: 5_000,
  // 500 bytes/s over 30 s windows: Postfix's smtpd_min_data_rate (500 B/s); a 56k modem sends 7,000
  dataRateMinBytes: 15_000,
  dataRateWindowMs: 30_000,
});

/** When the session deadline passes: nothing to do (closed), wait for the reply owed, or 421 now. */
export function atDeadline(open: boolean, owed: number | undefined): 'gone' | 'wait' | 'close' {
  if (!open) return 'gone';
  return owed ? 'wait' : 'close';
}

export interface ConnectionPolicy {
  /** After smtp-server's connect(): notes the socket a connection just added reads from. */
  connected(connections: Iterable<Connection>, socket: Socket): void;
  /** onConnect: the refusal (421: too many from this client) or undefined; an admitted session's deadline starts. */
  admit(session: SMTPServerSession, connections: Iterable<Connection>): SmtpError | undefined;
  /** onSecure: after STARTTLS the session reads from the TLS socket. */
  secured(socket: Socket, session: SMTPServerSession): void;
  /** onClose: the deadline stops, the client's place is free. */
  closed(session: SMTPServerSession): void;
}

export function createConnectionPolicy(options: { limits: SmtpLimits; authAfterTls: boolean; log: { info(fields: object, msg: string): void }; open: OpenConnection }): ConnectionPolicy {
  const { limits, log, open } = options;
  const perClient = createHoldCounter({ perAddress: limits.maxPerIp, per56: limits.maxPer56, per48: limits.maxPer48 });
  /** The socket smtp-server reads each connection from (connect() is how every connection comes in). */
  const sockets = new WeakMap<Connection, Socket>();
  /**
   * The session deadline: smtp-server has none (its idle timeout restarts on every byte). When it
   * passes, the connection gets `421` and is closed, unless the service itself is deciding on a
   * received message (or a command); then the reply comes first and the 421 right after it.
   */
  const armDeadline = (session: Tracked, ms: number) => {
    session.deadline = setTimeout(() => {
      const c = open(session);
      const now = atDeadline(c !== undefined, session.owed);
      if (now === 'wait') return armDeadline(session, 250);
      if (now === 'close') c!.send(421, `4.4.2 Session time limit of ${Math.round(limits.sessionMs / 1000)} s reached, closing connection`, false);
    }, ms);
    session.deadline.unref();
  };
  return {
    connected(connections, socket) {
      for (const c of connections) if (!sockets.has(c)) sockets.set(c, socket);
    },
    admit(session, connections) {
      const tracked = session as Tracked;
      // smtp-server adds a connection to `connections` before it asks onConnect about it
      for (const c of connections) if (c.session === session) tracked.connection = c;
      if (tracked.connection) {
        wrapSend(tracked.connection, options.authAfterTls);
        tracked.socket = sockets.get(tracked.connection);
      }
      const release = perClient.take(session.remoteAddress);
      if (!release) {
        log.info({ client: session.remoteAddress }, 'SMTP connection refused: too many open from this client');
        return smtpError(421, '4.7.0 Too many connections from your address or network, try again later');
      }
      tracked.release = release;
      armDeadline(tracked, limits.sessionMs);
      return undefined;
    },
    secured(socket, session) {
      (session as Tracked).socket = socket;
    },
    closed(session) {
      const tracked = session as Tracked;
      if (tracked.deadline) clearTimeout(tracked.deadline);
      tracked.release?.();
      tracked.release = undefined;
    },
  };
}
