// The errors people hit when starting the service, as one line with what to do (no stack trace).
import type { Config } from './config.ts';

/** One line saying what went wrong at start and what to do, for the errors people hit. */
export function startHint(err: unknown, config: Config): string | null {
  const e = err as NodeJS.ErrnoException & { port?: number; address?: string };
  if (e?.code === 'EADDRINUSE') {
    const which = e.port === config.smtpPort ? ['SMTP', 'EPHEMAIL_SMTP_PORT']
      : e.port === config.imapPort ? ['IMAP', 'EPHEMAIL_IMAP_PORT']
      : e.port === config.pop3Port ? ['POP3', 'EPHEMAIL_POP3_PORT']
      : ['HTTP', 'EPHEMAIL_HTTP_PORT'];
    const off = which[0] === 'IMAP' || which[0] === 'POP3' ? ` (or ${which[1]}=off)` : '';
    return `the ${which[0]} port ${e.address ?? ''}:${e.port} is already in use (another ephemail, Mailpit or MailHog?). Stop it, or pick another port: ${which[1]}=<port> npm start${off}`;
  }
  if (e?.code === 'EACCES') return `no permission to listen on port ${e.port}: ports below 1024 need root or CAP_NET_BIND_SERVICE; use a port above 1024 (EPHEMAIL_SMTP_PORT, EPHEMAIL_HTTP_PORT)`;
  if (e?.code === 'EADDRNOTAVAIL') return `the address ${e.address} is not one of this machine's (EPHEMAIL_HTTP_HOST / EPHEMAIL_SMTP_HOST)`;
  return null;
}

