// What the receiver keeps on an smtp-server session, shared by the phases (connection.ts,
// recipients.ts, data.ts, replies.ts). Types only.
import type { Socket } from 'node:net';
import type { SMTPServer, SMTPServerSession } from 'smtp-server';

/** smtp-server's connection object (an element of its public `connections` set). */
export type Connection = SMTPServer['connections'] extends Set<infer C> ? C : never;

/**
 * What the receiver keeps on a session: `connection` (its smtp-server connection, open while it is
 * in `server.connections`), `socket` (the one it reads from: the TCP socket, the TLS one after
 * STARTTLS), `owed` (replies the service is deciding now: a callback of ours not yet called; the
 * session deadline waits for them), `release` (its place among the client's connections),
 * `deadline` (the session deadline's timer), `faultData` (recipients whose RCPT saw a `data` fault
 * rule left, docs/faults.md; looked at the end of DATA).
 */
export type Tracked = SMTPServerSession & { connection?: Connection; socket?: Socket; owed?: number; release?: () => void; deadline?: NodeJS.Timeout; faultData?: Set<string> };

/** The session's connection while it is open (smtp-server drops it from `connections` as it closes). */
export type OpenConnection = (session: SMTPServerSession) => Connection | undefined;
