// The SMTP receiver (smtp-server): catch-all for the active domains, no AUTH, SIZE enforced while
// streaming, and a 250 only after the store made every copy durable. Reply codes come from
// smtpReplyFor(), the one translator of errors to SMTP.
import { X509Certificate } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { mailedByOf, parseAddress } from '../domain/address.ts';
import { ipRangeMatcher } from '../domain/ip-ranges.ts';
import { createHoldCounter, ipBucket } from '../domain/limits.ts';
import { StoreFullError, StoreUnavailableError } from '../domain/errors.ts';
import type { Core } from '../services/core.ts';
import type { DomainState } from '../services/domains.ts';
import { splitReply } from '../services/faults.ts';
import { ingest } from '../services/ingest.ts';
import type { FaultRule } from '../store/faults.ts';
import { installProxyFront } from './proxy-protocol.ts';
import { createCertificateReloader, type CertificateReloader, type ReloadOutcome } from './tls-reload.ts';

export const MAX_RECIPIENTS = 100;
/** Messages up to this size may be summarized on the event loop (a linear scan: tens of µs). */
export const FAST_HERE_BYTES = 128 * 1024;

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

/** One client (an IPv4 address, an IPv6 /64) holds at most this part of EPHEMAIL_MAX_INFLIGHT_BYTES. */
export const CLIENT_SHARE_OF_INFLIGHT = 1 / 4;
/**
 * A DATA over the size limit is read (and dropped) to its end for at most this many bytes past the
 * limit, then answered 552 with the session going on, as a client that did not declare SIZE
 * expects; past that (a flood), 552 at once and the connection is closed, the rest never read.
 */
export const OVERSIZE_GRACE_BYTES = 1024 * 1024;
/** After the 552 to a flood: how long the reply has to reach the client before the socket is destroyed. */
const OVERSIZED_LINGER_MS = 1000;

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

/** smtp-server's connection object (an element of its public `connections` set). */
type Connection = SMTPServer['connections'] extends Set<infer C> ? C : never;
/**
 * What the receiver keeps on a session: `connection` (its smtp-server connection, open while it is
 * in `server.connections`), `socket` (the one it reads from: the TCP socket, the TLS one after
 * STARTTLS), `owed` (replies the service is deciding now: a callback of ours not
 * yet called; the session deadline waits for them), `faultData` (recipients whose RCPT saw a `data`
 * fault rule left, docs/faults.md; looked at the end of DATA).
 */
type Tracked = SMTPServerSession & { connection?: Connection; socket?: Socket; owed?: number; release?: () => void; deadline?: NodeJS.Timeout; faultData?: Set<string> };

/**
 * smtp-server picks an enhanced status code from the reply code alone (550 → 5.1.1) and has no
 * option to name one, but our replies need specific ones (550 5.1.2 for an unknown domain). A reply
 * whose text starts with its own enhanced code is sent as written: `send` (the public method every
 * reply goes through) of each of this receiver's connections passes no context for it, which
 * smtp-server reads as "no code of mine". Per connection, never process-wide; the upstream change
 * that would make this unnecessary is named in docs/decisions.md ("SMTP").
 */
const OWN_ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;
/**
 * Wraps the connection's `send`: own enhanced codes (above), and with `authAfterTls` the EHLO reply
 * of a session not yet in TLS lists no AUTH (Postfix's `smtpd_tls_auth_only = yes`: credentials
 * are asked for only where they cannot be read on the way). smtp-server lists AUTH whenever the
 * command is enabled; disabling it per session (`session.disabledCommands`) would also turn the
 * 538 "STARTTLS first" to an early AUTH into a 500, so the one reply that lists it is filtered.
 */
function wrapSend(connection: Connection, authAfterTls: boolean): void {
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) => {
    if (authAfterTls && code === 250 && Array.isArray(data) && !connection.secure) data = data.filter((line) => !/^AUTH /.test(line));
    send(code, data, typeof data === 'string' && OWN_ENHANCED.test(data) ? false : context);
  };
}

/** Counts a reply the service owes the session until `callback` is called (once). */
function owing<A extends unknown[]>(session: SMTPServerSession, callback: (...args: A) => void): (...args: A) => void {
  const tracked = session as Tracked;
  tracked.owed = (tracked.owed ?? 0) + 1;
  let owed = true;
  return (...args) => {
    if (owed) tracked.owed!--;
    owed = false;
    callback(...args);
  };
}

type SmtpError = Error & { responseCode: number };
const smtpError = (code: number, message: string): SmtpError => Object.assign(new Error(message), { responseCode: code });

/** The one translation of an ingest failure to an SMTP reply: temporary (4xx) unless the message itself is at fault. */
export function smtpReplyFor(err: unknown): SmtpError {
  if (err instanceof StoreFullError) return smtpError(452, '4.3.1 Insufficient system storage, try again later');
  if (err instanceof StoreUnavailableError) return smtpError(451, '4.3.0 Temporary storage failure, try again later');
  return smtpError(451, '4.3.0 Local error in processing, try again later');
}

/** The metrics label of a refusal: why the message was not stored. */
function refusalReason(err: Error): string {
  const own = (err as SmtpError & { reason?: string }).reason;
  if (own) return own;
  const code = (err as SmtpError).responseCode;
  if (code === 552) return 'too_large';
  if (code === 452) return 'no_resources';
  if (code === 451) return 'temporary_failure';
  return String(code ?? 'other');
}

export interface SmtpListener {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stops accepting; waits for transactions in flight (bounded). */
  close(): Promise<void>;
  /**
   * Re-reads the operator's STARTTLS files now (SIGHUP); 'off' without such files. They are also
   * re-read when they change.
   */
  reloadTls(reason: string): Promise<ReloadOutcome | 'off'>;
  /** When the certificate new STARTTLS sessions get expires (ms since the epoch); null without TLS. */
  tlsNotAfter(): number | null;
  /** The key and certificate new STARTTLS sessions get now (the latest good pair), or null without TLS: IMAP and POP3 use the same (imap/tls.ts). */
  tlsPair(): { key: string | Buffer; cert: string | Buffer } | null;
  readonly running: boolean;
  readonly server: SMTPServer;
}

/** STARTTLS material; `files` (the operator's PEM files) are watched and re-read when they change. */
export interface SmtpTls {
  key: string | Buffer;
  cert: string | Buffer;
  /** Tests set the poll interval and the quiet time after a directory event (tls-reload.ts). */
  files?: { certFile: string; keyFile: string; pollMs?: number; settleMs?: number };
}

/**
 * TLS material for STARTTLS: the operator's files, or a certificate made now for EPHEMAIL_DOMAINS.
 * Domains added at run time are not in it: senders do not verify a self-signed certificate anyway
 * (an MX's TLS is opportunistic), and a public MX uses the operator's files (docs/deploy.md).
 */
async function tlsOptions(config: Core['config']): Promise<SmtpTls | null> {
  const tls = config.smtpTls;
  if (tls.mode === 'off') return null;
  if (tls.mode === 'files') {
    const { readFileSync } = await import('node:fs');
    return { key: readFileSync(tls.keyFile), cert: readFileSync(tls.certFile), files: { certFile: tls.certFile, keyFile: tls.keyFile } };
  }
  const selfsigned = (await import('selfsigned')).default as unknown as { generate(attrs: { name: string; value: string }[], opts: Record<string, unknown>): Promise<{ private: string; cert: string }> };
  const pems = await selfsigned.generate([{ name: 'commonName', value: config.domains[0] }], { days: 365, keySize: 2048, algorithm: 'sha256', extensions: [{ name: 'subjectAltName', altNames: config.domains.map((d) => ({ type: 2, value: d })) }] });
  return { key: pems.private, cert: pems.cert };
}

export async function createSmtpReceiverWithTls(core: Core, overrides: Partial<SmtpLimits> = {}): Promise<SmtpListener> {
  return createSmtpReceiver(core, overrides, await tlsOptions(core.config));
}

export function createSmtpReceiver(core: Core, overrides: Partial<SmtpLimits> = {}, tls: SmtpTls | null = null): SmtpListener {
  const { config } = core;
  const limits: SmtpLimits = { ...DEFAULT_SMTP_LIMITS, ...overrides };
  // inbound caps (off at 0): minute windows in the shared limiter, so every node counts together
  const ipCap = config.smtpCaps.perIpPerMinute ? { perMinute: config.smtpCaps.perIpPerMinute, perDay: Infinity } : null;
  const addressCap = config.smtpCaps.perAddressPerMinute ? { perMinute: config.smtpCaps.perAddressPerMinute, perDay: Infinity } : null;
  const perClient = createHoldCounter({ perAddress: limits.maxPerIp, per56: limits.maxPer56, per48: limits.maxPer48 });
  // AUTH offered (accept-any) with STARTTLS on: offered only after STARTTLS
  const authAfterTls = config.smtpAuth === 'accept-any' && tls !== null;
  let inflightBytes = 0;
  /** In-flight bytes by client (ipBucket: an IPv4 address, an IPv6 /64); absent at 0. */
  const heldByClient = new Map<string, number>();
  const clientShare = Math.floor(config.maxInflightBytes * CLIENT_SHARE_OF_INFLIGHT);
  /** The socket smtp-server reads each connection from (connect() is how every connection comes in). */
  const sockets = new WeakMap<Connection, Socket>();
  let running = false;
  // MIME parsing runs on the summary lane of the worker pool (started on the first message); SQLite stays on this thread
  const summaries = core.workers.summary;
  // A small, plainly structured message is summarized right here (one linear pass over at most
  // FAST_HERE_BYTES, no body decoded): a worker round trip would cost more than the work. Anything
  // else goes to the summary lane. The summary module is loaded on the first message.
  let summary: Promise<typeof import('../derive/summary.ts')> | null = null;
  const summaryOf = async (raw: Buffer) => {
    if (raw.byteLength <= FAST_HERE_BYTES) {
      const { fastSummary } = await (summary ??= import('../derive/summary.ts'));
      const fast = fastSummary(raw);
      if (fast) return { raw, ...fast };
    }
    return summaries.run('summarize', raw, config);
  };

  /** The session's connection while it is open (smtp-server drops it from `connections` as it closes). */
  const openConnection = (session: SMTPServerSession): Connection | undefined => {
    const c = (session as Tracked).connection;
    return c && server.connections.has(c) ? c : undefined;
  };
  /**
   * The session deadline: smtp-server has none (its idle timeout restarts on every byte). When it
   * passes, the connection gets `421` and is closed, unless the service itself is deciding on a
   * received message (or a command); then the reply comes first and the 421 right after it.
   */
  const armDeadline = (session: Tracked, ms: number) => {
    session.deadline = setTimeout(() => {
      const c = openConnection(session);
      if (!c) return;
      if (session.owed) return armDeadline(session, 250);
      c.send(421, `4.4.2 Session time limit of ${Math.round(limits.sessionMs / 1000)} s reached, closing connection`, false);
    }, ms);
    session.deadline.unref();
  };

  const server = new SMTPServer({
    name: config.domains[0],
    banner: 'ephemail ESMTP: receive-only disposable inboxes',
    authOptional: true,
    // opt-in compatibility (DECISIONS: defaults stay no AUTH, no TLS): AUTH that accepts anyone, STARTTLS
    disabledCommands: [...(config.smtpAuth === 'accept-any' ? [] : ['AUTH']), ...(tls ? [] : ['STARTTLS'])],
    ...(tls ? { key: tls.key, cert: tls.cert, hideSTARTTLS: false } : {}),
    // with STARTTLS on, AUTH only after it (Postfix's smtpd_tls_auth_only): before, 538; without
    // TLS there is nothing to wait for, so AUTH works in clear (it accepts anyone anyway); EHLO
    // lists AUTH only where it is taken (wrapSend)
    allowInsecureAuth: config.smtpAuth === 'accept-any' && !tls,
    size: config.maxMessageBytes,
    rejectOversized: true,
    maxClients: limits.maxClients,
    maxRecipients: MAX_RECIPIENTS,
    hideENHANCEDSTATUSCODES: false,
    hideDSN: true,
    hideSize: false,
    hide8BITMIME: false,
    hidePIPELINING: false,
    hideSMTPUTF8: false,
    // AUTH is off by default (no 530 for anonymous senders; nothing here uses a login); with
    // EPHEMAIL_SMTP_AUTH=accept-any, PLAIN and LOGIN are offered and any credentials pass
    authMethods: config.smtpAuth === 'accept-any' ? ['PLAIN', 'LOGIN'] : [],
    onAuth(auth, session, reply) {
      const callback = owing(session, reply);
      if (config.smtpAuth !== 'accept-any') return callback(smtpError(502, '5.5.1 AUTH is not offered'));
      callback(null, { user: auth.username || 'anonymous' });
    },
    // inbound only: no XCLIENT/XFORWARD spoofing of the client address, no PROXY header trust
    useXClient: false,
    useXForward: false,
    useProxy: false,
    disableReverseLookup: true,
    socketTimeout: limits.idleMs,
    closeTimeout: 10_000,
    maxAllowedUnauthenticatedCommands: false,
    logger: false,

    onConnect(session, callback) {
      const tracked = session as Tracked;
      // smtp-server adds a connection to `connections` before it asks onConnect about it
      for (const c of server.connections) if (c.session === session) tracked.connection = c;
      if (tracked.connection) {
        wrapSend(tracked.connection, authAfterTls);
        tracked.socket = sockets.get(tracked.connection);
      }
      const release = perClient.take(session.remoteAddress);
      if (!release) {
        core.log.info({ client: session.remoteAddress }, 'SMTP connection refused: too many open from this client');
        return callback(smtpError(421, '4.7.0 Too many connections from your address or network, try again later'));
      }
      tracked.release = release;
      armDeadline(tracked, limits.sessionMs);
      callback();
    },
    onSecure(socket, session, callback) {
      (session as Tracked).socket = socket; // after STARTTLS the session reads from the TLS socket
      callback();
    },
    onClose(session) {
      const tracked = session as Tracked;
      if (tracked.deadline) clearTimeout(tracked.deadline);
      tracked.release?.();
      tracked.release = undefined;
    },
    onMailFrom(address, session, reply) {
      const callback = owing(session, reply);
      if (/[\r\n\u0000]/.test(address.address)) return callback(smtpError(501, '5.1.7 Bad sender address syntax'));
      if (!ipCap) return callback();
      const client = session.remoteAddress;
      capped(`smtp-ip:${ipBucket(client)}`, ipCap, 'ip', { client }, (retry) =>
        smtpError(451, `4.7.1 Too much mail from your address: at most ${ipCap.perMinute} messages a minute, try again in ${retry} s`),
      ).then(callback);
    },
    onRcptTo(address, session, reply) {
      const callback = owing(session, reply);
      const raw = address.address;
      if (/[\r\n\u0000]/.test(raw)) return callback(smtpError(501, '5.1.3 Bad recipient address syntax'));
      const parsed = parseAddress(raw);
      if (!parsed) return callback(smtpError(553, '5.1.3 Recipient address is not one this service can name: use local-part@domain with a dot-atom local part of at most 64 bytes'));
      let state: DomainState | null;
      try {
        state = core.domains.stateOf(parsed.domain);
      } catch (err) {
        return callback(smtpReplyFor(err)); // the added domains were never read (store down since start): 451
      }
      if (state !== 'active') {
        const why = state === 'retired' ? 'no longer accepts' : 'does not accept';
        return callback(smtpError(550, `5.1.2 This service ${why} mail for ${parsed.domain}; active domains: ${core.domains.active().join(', ')}`));
      }
      // SMTP faults on demand: one indexed read (SQLite) or one script (Redis) per RCPT; a rule
      // answers this RCPT, and a data rule is remembered for the end of DATA
      faultAt(parsed.address, session as Tracked).then((refusal) => {
        if (refusal || !addressCap) return callback(refusal);
        capped(`smtp-rcpt:${parsed.address}`, addressCap, 'address', { client: session.remoteAddress, recipient: parsed.address }, (retry) =>
          smtpError(452, `4.2.2 ${parsed.address} is receiving too much mail: at most ${addressCap.perMinute} messages a minute, try again in ${retry} s`),
        ).then(callback);
      });
    },
    onData(stream: SMTPServerDataStream, session, received) {
      const tracked = session as Tracked;
      const client = ipBucket(session.remoteAddress);
      // the reply is owed (the session deadline waits for it) once the message is in, not while it arrives
      let reply = received;
      let answered = false;
      let chunks: Buffer[] = [];
      let size = 0;
      // Bytes this message holds against the budget shared by every session (so 1,000 slow senders
      // cannot make the process hold 1,000 × 30 MiB) and against its client's share of it (so one
      // client cannot hold it all); released once, when the reply goes out or the session ends.
      let held = 0;
      let overBudget: 'all' | 'client' | null = null;
      let endedAt = 0;
      const release = () => {
        chunks = [];
        if (!held) return;
        inflightBytes -= held;
        const left = (heldByClient.get(client) ?? 0) - held;
        if (left > 0) heldByClient.set(client, left);
        else heldByClient.delete(client);
        held = 0;
      };
      const callback: typeof reply = (err, message) => {
        clearInterval(rate);
        release();
        if (answered) return; // a session closed by us (too large, too slow) whose stream then ends with an error
        answered = true;
        const m = core.metrics;
        if (m) {
          if (err) m.smtpRefused.inc({ reason: refusalReason(err) });
          else {
            const n = session.envelope.rcptTo.length;
            m.smtpAccepted.inc({ recipients: n === 1 ? '1' : n <= 10 ? '2-10' : '11-100' });
            m.smtpBytes.inc(size);
            if (endedAt) m.smtpAckSeconds.observe((performance.now() - endedAt) / 1000);
          }
        }
        reply(err, message);
      };
      // The minimum DATA rate: checked once a window while the message arrives.
      let sizeAtCheck = 0;
      const rate = setInterval(() => {
        if (size - sizeAtCheck >= limits.dataRateMinBytes) return void (sizeAtCheck = size);
        const c = openConnection(session);
        const seconds = limits.dataRateWindowMs / 1000;
        core.log.info({ client: session.remoteAddress, bytes: size, window_seconds: seconds }, 'SMTP DATA too slow; connection closed');
        const err = Object.assign(smtpError(421, `4.4.2 DATA too slow: fewer than ${limits.dataRateMinBytes} bytes in ${seconds} s, closing connection`), { reason: 'too_slow' });
        callback(err); // frees the budget now (smtp-server sends nothing for it: the stream never ends)
        c?.send(421, err.message, false);
      }, limits.dataRateWindowMs);
      rate.unref();
      stream.on('data', (chunk: Buffer) => {
        if (answered) return;
        size += chunk.length;
        if (size > config.maxMessageBytes) {
          release(); // nothing of it is kept: the reply is 552 whatever follows
          if (size > config.maxMessageBytes + OVERSIZE_GRACE_BYTES) refuseOversized();
          return;
        }
        if (overBudget) return;
        const mine = heldByClient.get(client) ?? 0;
        if (inflightBytes + chunk.length > config.maxInflightBytes || mine + chunk.length > clientShare) {
          overBudget = mine + chunk.length > clientShare ? 'client' : 'all'; // keep draining the stream, buffer nothing more
          release();
          return;
        }
        inflightBytes += chunk.length;
        heldByClient.set(client, mine + chunk.length);
        held += chunk.length;
        chunks.push(chunk);
      });
      /**
       * Past the size limit and its grace the rest of the message is not read (the flood): 552, the
       * socket stops being read and is ended, and destroyed once the reply had time to arrive. The
       * client learns the limit from SIZE in EHLO (and a declared SIZE over it gets 552 at MAIL).
       */
      const refuseOversized = () => {
        stream.pause(); // nothing reads the stream: smtp-server's parser, then the socket, stop
        const socket = tracked.socket;
        socket?.pause();
        const err = smtpError(552, `5.3.4 Message exceeds the maximum size of ${config.maxMessageBytes} bytes, closing connection`);
        core.log.info({ client: session.remoteAddress, limit: config.maxMessageBytes }, 'SMTP DATA over the size limit: 552 and connection closed, the rest not read');
        callback(err);
        const c = openConnection(session);
        if (!c) return;
        c.send(552, err.message, false);
        if (!socket || socket.destroyed) return c.close();
        socket.end();
        setTimeout(() => socket.destroy(), OVERSIZED_LINGER_MS).unref();
      };
      stream.on('error', (err) => callback(smtpReplyFor(err)));
      stream.on('end', () => {
        clearInterval(rate);
        if (answered) return;
        reply = owing(session, received);
        endedAt = performance.now();
        if (stream.sizeExceeded || size > config.maxMessageBytes) {
          return callback(smtpError(552, `5.3.4 Message exceeds the maximum size of ${config.maxMessageBytes} bytes`));
        }
        if (overBudget === 'client') {
          return callback(smtpError(452, '4.3.1 Insufficient system resources: too much mail in flight from your address, try again later'));
        }
        if (overBudget) {
          return callback(smtpError(452, '4.3.1 Insufficient system resources: too much mail in flight, try again later'));
        }
        // an unpooled buffer of its own: it is handed (not copied) to a parse worker
        const raw = Buffer.allocUnsafeSlow(size);
        let at = 0;
        for (const c of chunks) at += c.copy(raw, at);
        const recipients = session.envelope.rcptTo.map((r) => parseAddress(r.address)!.address);
        const mailFrom = session.envelope.mailFrom;
        const mailedBy = mailedByOf(mailFrom ? mailFrom.address : null);
        const envelope = { clientIp: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', mailFrom: mailFrom ? mailFrom.address : '' };
        const store = () => summaryOf(raw)
          .then((summary) => ingest(core, summary, recipients, mailedBy, envelope))
          .then(
            (stored) => {
              // (debug: a line per message cost more than a tenth of ingest's CPU; metrics count the mail)
              core.log.debug({ id: stored[0]?.id, recipients: stored.length, bytes: size, from: mailFrom ? mailFrom.address : null, client: session.remoteAddress }, 'mail received');
              callback(null, `2.0.0 Ok: stored ${stored.length === 1 ? `as ${stored[0].id}` : `${stored.length} copies`}`);
            },
            (err) => {
              core.log.error({ err }, 'delivery failed; answered with a temporary error');
              callback(smtpReplyFor(err));
            },
          );
        const pending = (session as Tracked).faultData;
        if (!pending || !recipients.some((a) => pending.has(a))) return void store(); // the usual case: no rule
        dataFault(recipients, session as Tracked).then(
          (rule) => {
            if (!rule) return void store();
            const fields = { fault_id: rule.id, address: rule.address, client: session.remoteAddress };
            if (rule.reply !== null) {
              core.log.info({ ...fields, reply: rule.reply }, 'SMTP fault: DATA answered as the rule says; nothing stored');
              const { code, text } = splitReply(rule.reply);
              return callback(smtpError(code, text));
            }
            if (rule.disconnect) {
              core.log.info(fields, 'SMTP fault: connection dropped instead of the reply to DATA; nothing stored');
              openConnection(session)?.close();
              return callback(smtpError(421, '4.4.2 Connection dropped by a fault rule')); // (not sent: the connection is closing)
            }
            core.log.info({ ...fields, delay_seconds: rule.delaySeconds }, 'SMTP fault: the reply to DATA is delayed');
            setTimeout(() => {
              if (!openConnection(session)) {
                core.log.info(fields, 'SMTP fault: the client left during the delay; nothing stored');
                return callback(smtpError(421, '4.4.2 The client left during a delay')); // (not sent)
              }
              store();
            }, (rule.delaySeconds ?? 0) * 1000).unref(); // (a shutdown closes the connection; nothing waits for this)
          },
          (err) => {
            core.log.error({ err }, 'SMTP fault rules could not be read; answered with a temporary error');
            callback(smtpReplyFor(err));
          },
        );
      });
    },
  });
  server.on('error', (err) => core.log.warn({ err }, 'smtp connection error'));
  // every connection (smtp-server's own listener, the PROXY front) comes in through connect(),
  // which adds it to `connections` at once: note the socket it reads from
  const connect = server.connect.bind(server);
  server.connect = (socket, options) => {
    connect(socket, options);
    for (const c of server.connections) if (!sockets.has(c)) sockets.set(c, socket as Socket);
  };

  /** At RCPT: the error a fault rule answers with, or undefined (and notes data rules for the end of DATA). */
  async function faultAt(address: string, session: Tracked): Promise<SmtpError | undefined> {
    try {
      const { rule, dataRules } = await core.faults.takeFault(address, 'rcpt', core.clock.now());
      if (dataRules) (session.faultData ??= new Set()).add(address);
      else session.faultData?.delete(address);
      if (!rule?.reply) return undefined;
      core.log.info({ fault_id: rule.id, address, client: session.remoteAddress, reply: rule.reply }, 'SMTP fault: RCPT answered as the rule says');
      const { code, text } = splitReply(rule.reply);
      return smtpError(code, text);
    } catch (err) {
      core.log.error({ err }, 'SMTP fault rules could not be read; answered with a temporary error');
      return smtpReplyFor(err);
    }
  }

  /** At the end of DATA: the first data rule of the recipients (in their order) that applies, used once. */
  async function dataFault(recipients: string[], session: Tracked): Promise<FaultRule | null> {
    const now = core.clock.now();
    for (const address of new Set(recipients)) {
      if (!session.faultData?.has(address)) continue;
      const { rule, dataRules } = await core.faults.takeFault(address, 'data', now);
      if (!dataRules) session.faultData.delete(address);
      if (rule) return rule;
    }
    return null;
  }

  /**
   * Counts one against an inbound cap; resolves with the error to answer (past the cap, or the
   * limiter unreachable: temporary either way) or undefined to go on.
   */
  async function capped(bucket: string, cap: { perMinute: number; perDay: number }, name: 'ip' | 'address', fields: Record<string, string>, refusal: (retrySeconds: number) => SmtpError): Promise<SmtpError | undefined> {
    try {
      const r = await core.limiter.hit(bucket, cap, core.clock.now());
      if (r.allowed) return undefined;
      core.metrics?.smtpCapped.inc({ cap: name });
      core.log.info({ ...fields, cap: name, per_minute: cap.perMinute }, 'SMTP mail deferred: inbound cap reached');
      return refusal(r.retryAfterSeconds);
    } catch (err) {
      core.log.error({ err }, 'SMTP inbound cap could not be counted; answered with a temporary error');
      return smtpReplyFor(err);
    }
  }

  // Behind a TCP balancer: its connections start with a PROXY header naming the client, which
  // smtp-server then sees as the connection's address (caps, logs); other peers connect as before.
  const front = config.smtpProxyProtocol.length === 0 ? null : installProxyFront(server.server, {
    trusted: ipRangeMatcher(config.smtpProxyProtocol),
    headerMs: limits.proxyHeaderMs,
    maxPending: limits.maxClients,
    accept(socket, client) {
      core.log.debug({ peer: socket.remoteAddress, client: client?.address ?? null }, 'SMTP connection through a PROXY protocol balancer');
      server.connect(socket, client ? { remoteAddress: client.address, remotePort: client.port } : {});
    },
    acceptDirect: (socket) => server.connect(socket, {}),
    refused: (peer, reason) => core.log.warn({ peer, reason }, 'SMTP connection refused: PROXY protocol header'),
  });

  // The operator's files: re-read when they change; new STARTTLS sessions get the new pair.
  let current: { key: string | Buffer; cert: string | Buffer } | null = tls && { key: tls.key, cert: tls.cert };
  const reloader: CertificateReloader | null = !tls?.files ? null : createCertificateReloader({
    certFile: tls.files.certFile,
    keyFile: tls.files.keyFile,
    initial: { key: Buffer.from(tls.key), cert: Buffer.from(tls.cert) },
    apply: (pair) => {
      current = { key: pair.key, cert: pair.cert };
      server.updateSecureContext({ key: pair.key, cert: pair.cert });
    },
    log: core.log,
    pollMs: tls.files.pollMs,
    settleMs: tls.files.settleMs,
  });
  let tlsNotAfter: number | null = null;
  if (tls) {
    try {
      tlsNotAfter = new Date(new X509Certificate(tls.cert).validTo).getTime();
    } catch {
      tlsNotAfter = null;
    }
  }

  return {
    server,
    get running() {
      return running;
    },
    listen(port, host) {
      return new Promise((resolve, reject) => {
        const onError = (err: Error) => reject(err);
        server.server.once('error', onError);
        server.listen(port, host, () => {
          server.server.off('error', onError);
          running = true;
          resolve(server.server.address() as AddressInfo);
        });
      });
    },
    reloadTls: async (reason) => (reloader ? reloader.check(reason) : 'off'),
    tlsNotAfter: () => reloader?.current?.notAfter.getTime() ?? tlsNotAfter,
    tlsPair: () => current,
    close() {
      reloader?.close();
      return new Promise((resolve) => {
        if (!running) return resolve();
        running = false;
        server.close(() => resolve()); // the worker pool is assemble.ts's to close
        front?.close();
      });
    },
  };
}
