// Idle HTTP sockets: one on which no byte moves either way for `idleMs` is closed (a client that holds
// a socket and neither sends nor reads: a stalled download, a request nobody waits for). Checked by
// one sweep every `everyMs` over the open connections, as Node checks headersTimeout and
// requestTimeout, instead of a socket timeout: Node's `server.timeout` sets a timer per request and
// moves it on every read and write, a cost each response paid (bench/README.md, stop 32).
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

interface Seen {
  read: number;
  written: number;
  /** When the counts last moved (performance.now()). */
  since: number;
}

/**
 * Closes the server's sockets idle for `idleMs` or longer, looked at every `everyMs` (so closed
 * between idleMs and idleMs + everyMs). Returns a stop function; the sweep also stops with the
 * server. `now` is the clock (tests move it).
 */
export function closeIdleSockets(server: Server, idleMs: number, everyMs: number, now: () => number = () => performance.now()): () => void {
  const open = new Map<Socket, Seen>();
  const onConnection = (socket: Socket) => {
    open.set(socket, { read: 0, written: 0, since: now() });
    socket.once('close', () => open.delete(socket));
  };
  server.on('connection', onConnection);
  const sweep = () => {
    const t = now();
    for (const [socket, seen] of open) {
      // bytesWritten counts what is queued too: a client that stops reading shows no movement
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      if (read !== seen.read || written !== seen.written) {
        seen.read = read;
        seen.written = written;
        seen.since = t;
      } else if (t - seen.since >= idleMs) {
        open.delete(socket);
        socket.destroy();
      }
    }
  };
  const timer = setInterval(sweep, everyMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    server.off('connection', onConnection);
    open.clear();
  };
  server.once('close', stop);
  return stop;
}
