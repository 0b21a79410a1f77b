// The SMTP receiver: smtp-server through its public API, an adapter of ingest (services/ingest.ts).
// Catch-all for the active domains, no AUTH, SIZE enforced while streaming, and a 250 only after
// the store made every copy durable. By protocol phase: connection.ts (who may connect, the session
// deadline), recipients.ts (MAIL FROM, RCPT TO, their caps and fault rules), data.ts (the message's
// bytes and the in-flight budget, then ingest), replies.ts (reply codes: smtpReplyFor() is the one
// translator of errors to SMTP). This file puts them together: smtp-server's options, the PROXY
// front, STARTTLS material and its reloads, the listener.
import { X509Certificate } from 'node:crypto';
import { createRequire } from 'node:module';
import type { AddressInfo, Socket } from 'node:net';
import type { SMTPServerSession } from 'smtp-server';
import { ipRangeMatcher } from '../domain/ip-ranges.ts';
import type { Core } from '../services/core.ts';
import { createIngest } from '../services/ingest.ts';
import { createConnectionPolicy, DEFAULT_SMTP_LIMITS, type SmtpLimits } from './connection.ts';
import { createDataPhase, createInflightBudget } from './data.ts';
import { installProxyFront } from './proxy-protocol.ts';
import { createRecipientPhase, MAX_RECIPIENTS } from './recipients.ts';
import { owing, smtpError } from './replies.ts';
import type { Connection, Tracked } from './session.ts';
import { createCertificateReloader, type CertificateReloader, type ReloadOutcome } from './tls-reload.ts';
import { listenOn } from './listener.ts';

// smtp-server's CommonJS build, not its ES module: the ES build imports nodemailer's ES build,
// whose `import http from 'node:http'` makes Node load its bundled undici (fetch) at start, ~14 MB
// of RSS that nothing here uses (docs/architecture.md "Memory"). The CommonJS build requires
// node:http, which does not.
const { SMTPServer } = createRequire(import.meta.url)('smtp-server') as typeof import('smtp-server');
type SMTPServer = InstanceType<typeof SMTPServer>;

export { DEFAULT_SMTP_LIMITS, type SmtpLimits } from './connection.ts';
export { CLIENT_SHARE_OF_INFLIGHT, OVERSIZE_GRACE_BYTES } from './data.ts';
export { MAX_RECIPIENTS } from './recipients.ts';
export { smtpReplyFor } from './replies.ts';

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
  // AUTH offered (accept-any) with STARTTLS on: offered only after STARTTLS
  const authAfterTls = config.smtpAuth === 'accept-any' && tls !== null;
  let running = false;
  /** The session's connection while it is open (smtp-server drops it from `connections` as it closes). */
  const open = (session: SMTPServerSession): Connection | undefined => {
    const c = (session as Tracked).connection;
    return c && server.connections.has(c) ? c : undefined;
  };
  const connections = createConnectionPolicy({ limits, authAfterTls, log: core.log, open });
  const recipients = createRecipientPhase(core);
  const data = createDataPhase({ core, limits, budget: createInflightBudget(config.maxInflightBytes), ingest: createIngest(core), open, dataFault: recipients.dataFault });

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
      callback(connections.admit(session, server.connections));
    },
    onSecure(socket, session, callback) {
      connections.secured(socket as Socket, session); // after STARTTLS the session reads from the TLS socket
      callback();
    },
    onClose: (session) => connections.closed(session),
    onMailFrom: recipients.onMailFrom,
    onRcptTo: recipients.onRcptTo,
    onData: data.onData,
  });
  server.on('error', (err) => core.log.warn({ err }, 'smtp connection error'));
  // every connection (smtp-server's own listener, the PROXY front) comes in through connect(),
  // which adds it to `connections` at once: note the socket it reads from
  const connect = server.connect.bind(server);
  server.connect = (socket, options) => {
    connect(socket, options);
    connections.connected(server.connections, socket as Socket);
  };

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
    async listen(port, host) {
      const address = await listenOn(server.server, port, host);
      running = true;
      return address;
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
