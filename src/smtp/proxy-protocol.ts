// PROXY protocol v1 (text) and v2 (binary) in front of the SMTP receiver (docs/deploy.md, "SMTP
// behind a TCP load balancer"). A TCP balancer opens its own connection to us and starts it with a
// header naming the client; only peers in EPHEMAIL_SMTP_PROXY_PROTOCOL may do that, and from them
// the header is required (the HAProxy spec: a receiver must not guess whether it is present). A
// header from any other peer is refused, so no client can pick the address it is counted under.
//
// smtp-server's own `useProxy` reads v1 only and trusts exact addresses, not CIDR blocks, so the
// header is read here, on the raw socket, before smtp-server sees the connection.
import { isIPv4, isIPv6, type Server, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';

/** v1: "PROXY TCP4 1.2.3.4 5.6.7.8 1111 25\r\n", at most 107 bytes with the CRLF (the spec's bound). */
const V1_MAX = 107;
/** The 12-byte v2 signature (its "QUIT\n" makes a server that does not speak PROXY end the session). */
export const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
/**
 * Largest v2 header taken (16 fixed bytes, the addresses, TLVs). The format allows 65,551 bytes;
 * balancers send the addresses and a few TLVs (AWS: a VPC endpoint id, Azure: a link id).
 */
export const V2_MAX = 4096;

export type ProxyParse =
  | { state: 'more' }
  | { state: 'invalid'; reason: string }
  /** `source` null: the header says to use the connection's own addresses (v2 LOCAL, v1 UNKNOWN, UNSPEC, UNIX). */
  | { state: 'done'; version: 1 | 2; length: number; source: { address: string; port: number } | null };

const invalid = (reason: string): ProxyParse => ({ state: 'invalid', reason });
const PORT = /^(?:0|[1-9]\d{0,4})$/;

/** Whether `buf` starts with a whole PROXY signature: `PROXY ` (v1) or the 12 bytes of v2. */
export function startsWithProxySignature(buf: Buffer): boolean {
  const sig = buf[0] === V1_PREFIX[0] ? V1_PREFIX : buf[0] === V2_SIGNATURE[0] ? V2_SIGNATURE : null;
  return sig !== null && buf.length >= sig.length && buf.subarray(0, sig.length).equals(sig);
}

/**
 * Reads one PROXY header from the first bytes of a connection. Strict: a header must be exactly as
 * the spec writes it (v1: single spaces, CRLF, addresses of the named family, ports 0–65535; v2:
 * version 2, a known command, a length that holds the addresses of its family).
 */
export function parseProxyHeader(buf: Buffer): ProxyParse {
  if (buf.length === 0) return { state: 'more' };
  if (buf[0] === V1_PREFIX[0]) return parseV1(buf);
  if (buf[0] === V2_SIGNATURE[0]) return parseV2(buf);
  return invalid('no PROXY protocol header');
}

function parseV1(buf: Buffer): ProxyParse {
  const head = buf.subarray(0, Math.min(buf.length, V1_PREFIX.length));
  if (!head.equals(V1_PREFIX.subarray(0, head.length))) return invalid('no PROXY protocol header');
  const lf = buf.indexOf(0x0a);
  if (lf < 0) return buf.length >= V1_MAX ? invalid('v1 header longer than 107 bytes') : { state: 'more' };
  if (lf + 1 > V1_MAX) return invalid('v1 header longer than 107 bytes');
  if (buf[lf - 1] !== 0x0d) return invalid('v1 header not ended by CRLF');
  const line = buf.subarray(0, lf - 1).toString('latin1');
  const parts = line.split(' ');
  const length = lf + 1;
  if (parts[1] === 'UNKNOWN') return { state: 'done', version: 1, length, source: null };
  if (parts.length !== 6) return invalid('v1 header: expected PROXY TCP4|TCP6 <source> <destination> <source port> <destination port>');
  const [, proto, src, dst, sport, dport] = parts;
  const isFamily = proto === 'TCP4' ? isIPv4 : proto === 'TCP6' ? isIPv6 : null;
  if (!isFamily) return invalid(`v1 header: unknown protocol ${JSON.stringify(proto.slice(0, 10))}`);
  if (!isFamily(src) || !isFamily(dst)) return invalid(`v1 header: addresses are not ${proto} addresses`);
  if (!PORT.test(sport) || !PORT.test(dport) || Number(sport) > 65535 || Number(dport) > 65535) return invalid('v1 header: ports must be 0–65535');
  return { state: 'done', version: 1, length, source: { address: proto === 'TCP6' ? unmapped(ipaddr.IPv6.parse(src)) : src, port: Number(sport) } };
}

function parseV2(buf: Buffer): ProxyParse {
  const n = Math.min(buf.length, V2_SIGNATURE.length);
  if (!buf.subarray(0, n).equals(V2_SIGNATURE.subarray(0, n))) return invalid('no PROXY protocol header');
  if (buf.length < 16) return { state: 'more' };
  const verCmd = buf[12];
  if (verCmd >> 4 !== 2) return invalid(`v2 header: version ${verCmd >> 4}, expected 2`);
  const command = verCmd & 0x0f;
  if (command > 1) return invalid(`v2 header: unknown command ${command}`);
  const family = buf[13] >> 4;
  const transport = buf[13] & 0x0f;
  const declared = buf.readUInt16BE(14);
  const length = 16 + declared;
  if (length > V2_MAX) return invalid(`v2 header of ${length} bytes; at most ${V2_MAX} are taken`);
  if (family > 3 || transport > 2) return invalid('v2 header: unknown address family or transport');
  const needs = family === 1 ? 12 : family === 2 ? 36 : family === 3 ? 216 : 0;
  if (declared < needs) return invalid('v2 header: length too short for its addresses');
  if (buf.length < length) return { state: 'more' };
  // LOCAL: the balancer's own connection (a health check); UNSPEC or UNIX: no client IP to take
  if (command === 0 || family === 0 || family === 3) return { state: 'done', version: 2, length, source: null };
  if (transport !== 1) return invalid('v2 header: not a TCP (stream) connection');
  if (family === 1) {
    const address = `${buf[16]}.${buf[17]}.${buf[18]}.${buf[19]}`;
    return { state: 'done', version: 2, length, source: { address, port: buf.readUInt16BE(24) } };
  }
  const address = unmapped(ipaddr.fromByteArray([...buf.subarray(16, 32)]) as ipaddr.IPv6);
  return { state: 'done', version: 2, length, source: { address, port: buf.readUInt16BE(48) } };
}

/**
 * The client address as the rest of the service takes it: an IPv4-mapped IPv6 source
 * (`::ffff:198.51.100.9`, which a dual-stack balancer sends for an IPv4 client) is that IPv4
 * address, so SPF, the caps and the logs see an IP in the form they know; other IPv6 addresses
 * in their usual lowercase text form.
 */
function unmapped(addr: ipaddr.IPv6): string {
  return addr.isIPv4MappedAddress() ? addr.toIPv4Address().toString() : addr.toString();
}

export interface ProxyFrontOptions {
  /** Peers that must send a header. */
  trusted: (ip: string | undefined) => boolean;
  /** How long a trusted peer may take to send its header. */
  headerMs: number;
  /** Sockets waiting for their header at once; more are dropped. */
  maxPending: number;
  /** The connection, now with the client's address (or the peer's, for LOCAL/UNKNOWN). */
  accept(socket: Socket, client: { address: string; port: number } | null): void;
  /** A connection from an untrusted peer, as it comes. */
  acceptDirect(socket: Socket): void;
  /** The header was refused: log it (the socket is answered and closed here). */
  refused(peer: string | undefined, reason: string): void;
}

/** The reply to a connection whose PROXY header is refused (temporary: a misconfigured balancer gets fixed). */
export const PROXY_REFUSAL = '421 4.7.0 PROXY protocol header refused, closing connection\r\n';
/** How long a refused socket stays open for the reply to reach the client. */
const REFUSE_LINGER_MS = 1000;

function refuse(socket: Socket): void {
  socket.on('error', () => undefined);
  if (socket.destroyed) return;
  socket.end(PROXY_REFUSAL);
  setTimeout(() => socket.destroy(), REFUSE_LINGER_MS).unref();
}

/**
 * Takes over the listener's connections: trusted peers have their header read (then `accept`),
 * other peers go straight to `acceptDirect`, and a PROXY header as the first bytes of such a
 * connection gets PROXY_REFUSAL and the connection is closed.
 */
export function installProxyFront(listener: Server, options: ProxyFrontOptions): { close(): void } {
  const pending = new Set<Socket>();
  listener.removeAllListeners('connection');
  listener.on('connection', (socket: Socket) => {
    if (!options.trusted(socket.remoteAddress)) {
      options.acceptDirect(socket);
      watchFirstBytes(socket, options);
      return;
    }
    if (pending.size >= options.maxPending) {
      socket.on('error', () => undefined);
      socket.destroy();
      return;
    }
    pending.add(socket);
    let chunks: Buffer[] = [];
    let settled = false;
    const finish = () => {
      settled = true;
      pending.delete(socket);
      clearTimeout(timer);
      socket.removeListener('readable', onReadable);
      socket.removeListener('error', onGone);
      socket.removeListener('close', onGone);
      socket.removeListener('end', onGone);
    };
    const fail = (reason: string) => {
      if (settled) return;
      finish();
      options.refused(socket.remoteAddress, reason);
      refuse(socket);
    };
    const onGone = () => {
      if (settled) return;
      finish();
      socket.on('error', () => undefined);
      socket.destroy();
    };
    const timer = setTimeout(() => fail(`no PROXY protocol header within ${options.headerMs} ms`), options.headerMs);
    timer.unref();
    const onReadable = () => {
      let chunk: Buffer | null;
      while (!settled && (chunk = socket.read() as Buffer | null) !== null) {
        chunks.push(chunk);
        const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
        chunks = [buf];
        const r = parseProxyHeader(buf);
        if (r.state === 'more') {
          if (buf.length > V2_MAX) return fail('PROXY protocol header too long');
          continue;
        }
        if (r.state === 'invalid') return fail(r.reason);
        finish();
        // whatever the client sent after the header belongs to the SMTP session
        if (buf.length > r.length) socket.unshift(buf.subarray(r.length));
        options.accept(socket, r.source);
      }
    };
    socket.on('readable', onReadable);
    socket.on('error', onGone);
    socket.on('close', onGone);
    socket.on('end', onGone);
  });
  return {
    /** Drops the sockets still waiting for their header (the listener is closing). */
    close() {
      for (const s of pending) s.destroy();
    },
  };
}

/**
 * An untrusted peer: the first bytes it sends are looked at once. SMTP clients speak after the
 * greeting, and never with "PROXY " or the v2 signature; a balancer sends its header at once. The
 * listener runs before smtp-server's own (which then writes nothing to the ended socket).
 */
function watchFirstBytes(socket: Socket, options: ProxyFrontOptions): void {
  const first = (chunk: Buffer) => {
    socket.removeListener('data', first);
    if (!startsWithProxySignature(chunk)) return;
    options.refused(socket.remoteAddress, 'PROXY protocol header from a peer outside EPHEMAIL_SMTP_PROXY_PROTOCOL');
    refuse(socket);
  };
  socket.prependListener('data', first);
}
