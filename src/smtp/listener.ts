// Listening and closing, the same for every mail listener (SMTP, IMAP, POP3).
import type { AddressInfo, Server, Socket } from 'node:net';

/** Listens on `port` and `host`; resolves with the address, rejects with the listen error (EADDRINUSE). */
export function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Stops accepting, says `farewell` on each open session and destroys it a second later (a client
 * that does not close), and resolves when the server has closed.
 */
export function closeSessions(server: Server, sessions: Iterable<Socket>, farewell: string): Promise<void> {
  return new Promise((resolve) => {
    for (const s of sessions) {
      if (!s.destroyed) s.end(farewell);
      setTimeout(() => s.destroy(), 1000).unref();
    }
    server.close(() => resolve());
  });
}

/**
 * The listening face of a mail listener over its own sessions (IMAP, POP3): listen, and close once
 * (stop the front, say `farewell` to each session).
 */
export function mailListenerOf(server: Server, sessions: Set<Socket>, front: { close(): void }, farewell: string) {
  return {
    server,
    get sessions() {
      return sessions.size;
    },
    listen: (port: number, host: string) => listenOn(server, port, host),
    async close() {
      if (!server.listening) return;
      front.close();
      await closeSessions(server, sessions, farewell);
    },
  };
}
