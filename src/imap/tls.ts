// STARTTLS (IMAP) and STLS (POP3) with SMTP's certificate: the pair SMTP's STARTTLS sessions get
// now (the operator's files, re-read by SMTP's one reloader when they change or on SIGHUP, or the
// certificate made at start for EPHEMAIL_DOMAINS). No second reloader and no second certificate.
import { createSecureContext, type SecureContext } from 'node:tls';

export interface MailTls {
  /** The context new upgrades get (the latest good pair). */
  context(): SecureContext;
}

/** Where the pair comes from: SMTP's listener (smtp/server.ts `tlsPair`). */
export interface TlsSource {
  tlsPair(): { key: string | Buffer; cert: string | Buffer } | null;
}

/** TLS for IMAP and POP3, or null when SMTP has none (plaintext login is then allowed: loopback development). */
export function createMailTls(source: TlsSource): MailTls | null {
  if (source.tlsPair() === null) return null;
  let made: { pair: object; context: SecureContext } | null = null;
  return {
    context() {
      const pair = source.tlsPair()!;
      // made again only when SMTP took a new pair
      if (made?.pair !== pair) made = { pair, context: createSecureContext({ key: pair.key, cert: pair.cert }) };
      return made.context;
    },
  };
}
