// STARTTLS (IMAP) and STLS (POP3) with SMTP's TLS setting (EPHEMAIL_SMTP_TLS, _CERT/_KEY): the
// operator's files, re-read when they change (smtp/tls-reload.ts, the same rules), or a certificate
// made at start for EPHEMAIL_DOMAINS. One secure context for both listeners.
import { createSecureContext, type SecureContext } from 'node:tls';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { createCertificateReloader, type CertificateReloader } from '../smtp/tls-reload.ts';

export interface MailTls {
  /** The context new upgrades get (the latest good pair). */
  context(): SecureContext;
  reload(reason: string): Promise<string>;
  close(): void;
}

/** TLS for IMAP and POP3, or null when SMTP has none (plaintext login is then allowed: loopback development). */
export async function createMailTls(config: Config, log: Logger, pair?: { key: string | Buffer; cert: string | Buffer }): Promise<MailTls | null> {
  const tls = config.smtpTls;
  if (tls.mode === 'off' && !pair) return null;
  let key: string | Buffer;
  let cert: string | Buffer;
  if (pair) ({ key, cert } = pair);
  else if (tls.mode === 'files') {
    key = readFileSync(tls.keyFile);
    cert = readFileSync(tls.certFile);
  } else {
    const selfsigned = (await import('selfsigned')).default as unknown as { generate(attrs: { name: string; value: string }[], opts: Record<string, unknown>): Promise<{ private: string; cert: string }> };
    const pems = await selfsigned.generate([{ name: 'commonName', value: config.domains[0] }], { days: 365, keySize: 2048, algorithm: 'sha256', extensions: [{ name: 'subjectAltName', altNames: config.domains.map((d) => ({ type: 2, value: d })) }] });
    key = pems.private;
    cert = pems.cert;
  }
  let context = createSecureContext({ key, cert });
  const reloader: CertificateReloader | null = pair || tls.mode !== 'files' ? null : createCertificateReloader({
    certFile: tls.certFile,
    keyFile: tls.keyFile,
    initial: { key: Buffer.from(key), cert: Buffer.from(cert) },
    apply: (p) => {
      context = createSecureContext({ key: p.key, cert: p.cert });
    },
    log,
  });
  return {
    context: () => context,
    reload: async (reason) => (reloader ? reloader.check(reason) : 'off'),
    close: () => reloader?.close(),
  };
}
