// Replies: the one translation of errors to SMTP reply codes, the metrics label of a refusal, the
// replies a session is owed, and the patch that sends our enhanced status codes as written.
import type { SMTPServerSession } from 'smtp-server';
import { StoreFullError, StoreUnavailableError } from '../domain/errors.ts';
import { splitReply } from '../services/faults.ts';
import type { Connection, Tracked } from './session.ts';

export type SmtpError = Error & { responseCode: number };
export const smtpError = (code: number, message: string): SmtpError => Object.assign(new Error(message), { responseCode: code });

/** The one translation of an ingest failure to an SMTP reply: temporary (4xx) unless the message itself is at fault. */
export function smtpReplyFor(err: unknown): SmtpError {
  if (err instanceof StoreFullError) return smtpError(452, '4.3.1 Insufficient system storage, try again later');
  if (err instanceof StoreUnavailableError) return smtpError(451, '4.3.0 Temporary storage failure, try again later');
  return smtpError(451, '4.3.0 Local error in processing, try again later');
}

/** A fault rule's reply (`550 5.1.1 text`, docs/faults.md) as the error smtp-server sends. */
export function ruleReply(reply: string): SmtpError {
  const { code, text } = splitReply(reply);
  return smtpError(code, text);
}

/** The metrics label of a refusal: why the message was not stored. */
export function refusalReason(err: Error): string {
  const own = (err as SmtpError & { reason?: string }).reason;
  if (own) return own;
  const code = (err as SmtpError).responseCode;
  if (code === 552) return 'too_large';
  if (code === 452) return 'no_resources';
  if (code === 451) return 'temporary_failure';
  return String(code ?? 'other');
}

/** Counts a reply the service owes the session until `callback` is called (once). */
export function owing<A extends unknown[]>(session: SMTPServerSession, callback: (...args: A) => void): (...args: A) => void {
  const tracked = session as Tracked;
  tracked.owed = (tracked.owed ?? 0) + 1;
  let owed = true;
  return (...args) => {
    if (owed) tracked.owed!--;
    owed = false;
    callback(...args);
  };
}

/**
 * smtp-server picks an enhanced status code from the reply code alone (550 → 5.1.1) and has no
 * option to name one, but our replies need specific ones (550 5.1.2 for an unknown domain). A reply
 * whose text starts with its own enhanced code is sent as written: `send` (the public method every
 * reply goes through) of each of this receiver's connections passes no context for it, which
 * smtp-server reads as "no code of mine". Per connection, never process-wide; the upstream change
 * that would make this unnecessary is named in docs/decisions.md ("SMTP").
 */
export const OWN_ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;

/**
 * Wraps the connection's `send`: own enhanced codes (above), and with `authAfterTls` the EHLO reply
 * of a session not yet in TLS lists no AUTH (Postfix's `smtpd_tls_auth_only = yes`: credentials
 * are asked for only where they cannot be read on the way). smtp-server lists AUTH whenever the
 * command is enabled; disabling it per session (`session.disabledCommands`) would also turn the
 * 538 "STARTTLS first" to an early AUTH into a 500, so the one reply that lists it is filtered.
 */
export function wrapSend(connection: Pick<Connection, 'send' | 'secure'>, authAfterTls: boolean): void {
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) => {
    if (authAfterTls && code === 250 && Array.isArray(data) && !connection.secure) data = data.filter((line) => !/^AUTH /.test(line));
    send(code, data, typeof data === 'string' && OWN_ENHANCED.test(data) ? false : context);
  };
}
