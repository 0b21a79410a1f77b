// The operator's STARTTLS certificate, re-read when it changes (docs/deploy.md, "TLS certificates
// that renew"). Three triggers run the same check: a change in the files' directories (fs.watch:
// certbot's symlink swap, a Kubernetes secret's ..data swap, a plain copy), a poll (in case the
// watch misses one: network file systems, a directory replaced), and SIGHUP (main.ts). The check
// reads both files and does nothing when their bytes are unchanged; a pair that does not make a
// secure context (a key for another certificate, half-written PEM) leaves the previous one in
// place and is logged as an error once. New STARTTLS upgrades take the new context; sessions
// already in TLS keep theirs.
import { createHash, X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';

export type ReloadOutcome = 'unchanged' | 'reloaded' | 'failed';

export interface TlsPair {
  key: Buffer;
  cert: Buffer;
}

export interface CertificateReloader {
  /** Re-reads the files now; says what came of it. */
  check(reason: string): Promise<ReloadOutcome>;
  /** The certificate served to new STARTTLS sessions: SHA-256 fingerprint and expiry. */
  readonly current: { fingerprint256: string; notAfter: Date } | null;
  close(): void;
}

export interface ReloaderOptions {
  certFile: string;
  keyFile: string;
  /** The pair read at start (already in use). */
  initial: TlsPair;
  /** Puts a checked pair in use for new connections. */
  apply(pair: TlsPair): void;
  log: Logger;
  /** Poll interval (default 60 s); the directory watch usually sees a change at once. */
  pollMs?: number;
  /** Quiet time after a directory event before reading (renewals write the key and certificate one after the other). */
  settleMs?: number;
}

const digest = (pair: TlsPair) => createHash('sha256').update(pair.cert).update('\0').update(pair.key).digest('hex');

function describe(cert: Buffer): { fingerprint256: string; notAfter: Date } | null {
  try {
    const x = new X509Certificate(cert);
    return { fingerprint256: x.fingerprint256, notAfter: new Date(x.validTo) };
  } catch {
    return null;
  }
}

export function createCertificateReloader(options: ReloaderOptions): CertificateReloader {
  const { certFile, keyFile, log } = options;
  let inUse = digest(options.initial);
  let current = describe(options.initial.cert);
  /** The digest of the last pair refused, so a broken pair is logged once, not at every poll. */
  let refused: string | null = null;
  let running: Promise<ReloadOutcome> | null = null;
  let again = false;
  let closed = false;

  const readAndApply = async (reason: string): Promise<ReloadOutcome> => {
    let pair: TlsPair;
    try {
      const [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
      pair = { cert, key };
    } catch (err) {
      const sig = `read:${(err as NodeJS.ErrnoException).code ?? String(err)}`;
      if (refused !== sig) log.error({ err, reason, cert_file: certFile, key_file: keyFile }, 'STARTTLS certificate files could not be read; keeping the certificate in use');
      refused = sig;
      return 'failed';
    }
    const d = digest(pair);
    if (d === inUse) {
      refused = null;
      log.debug({ reason }, 'STARTTLS certificate unchanged');
      return 'unchanged';
    }
    if (d === refused) return 'failed';
    try {
      createSecureContext({ key: pair.key, cert: pair.cert }); // throws on a key that is not the certificate's
      const info = describe(pair.cert);
      if (!info) throw new Error('the certificate file holds no PEM certificate');
      options.apply(pair);
      inUse = d;
      refused = null;
      current = info;
      log.info({ reason, fingerprint256: info.fingerprint256, not_after: info.notAfter.toISOString() }, 'STARTTLS certificate reloaded; new connections get it');
      return 'reloaded';
    } catch (err) {
      refused = d;
      log.error({ err: { message: (err as Error).message }, reason, cert_file: certFile, key_file: keyFile }, 'STARTTLS certificate and key do not make a usable pair; keeping the certificate in use');
      return 'failed';
    }
  };

  /** One check at a time; a trigger during a check runs one more after it. */
  const check = (reason: string): Promise<ReloadOutcome> => {
    if (closed) return Promise.resolve('unchanged');
    if (running) {
      again = true;
      return running.then(() => check(reason));
    }
    running = readAndApply(reason).finally(() => {
      running = null;
      if (again && !closed) {
        again = false;
        void check('change during a check');
      }
    });
    return running;
  };

  let settle: NodeJS.Timeout | null = null;
  // any event in the directory may be ours (certbot swaps the links in live/, a Kubernetes secret its
  // `..data` link, not the files' own names); the check compares bytes, so others cost two reads
  const onEvent = () => {
    if (settle) clearTimeout(settle);
    settle = setTimeout(() => void check('file change'), options.settleMs ?? 200);
    settle.unref();
  };
  const watchers: FSWatcher[] = [];
  for (const dir of new Set([dirname(certFile), dirname(keyFile)])) {
    try {
      const w = watch(dir, { persistent: false }, onEvent);
      w.on('error', (err) => log.warn({ err, dir }, 'watching the STARTTLS certificate directory failed; the poll and SIGHUP still reload'));
      watchers.push(w);
    } catch (err) {
      log.warn({ err, dir }, 'cannot watch the STARTTLS certificate directory; the poll and SIGHUP still reload');
    }
  }
  const poll = setInterval(() => void check('poll'), options.pollMs ?? 60_000);
  poll.unref();

  return {
    check,
    get current() {
      return current;
    },
    close() {
      closed = true;
      clearInterval(poll);
      if (settle) clearTimeout(settle);
      for (const w of watchers) w.close();
    },
  };
}
