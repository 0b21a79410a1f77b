// Ingest: one received message and its served recipients → the message stored once, one row per
// inbox → wake-ups. Resolves only after the store made it durable; the SMTP 250 waits on it.
import { verdictsInput } from '../derive/authentication-view.ts';
import type { MessageSummary } from '../derive/summary.ts';
import type { MessageEnvelope, NewEmail, StoredEmail } from '../store/store.ts';
import type { Core } from './core.ts';

/**
 * `envelope`: the SMTP session's client IP, HELO name and MAIL FROM, kept with the message for its
 * authentication verdicts, which are then computed in the background (never before the 250).
 */
export async function ingest(core: Core, message: MessageSummary, recipients: string[], mailedBy: string | null, envelope?: MessageEnvelope): Promise<StoredEmail[]> {
  const receivedAt = core.clock.now();
  const expiresAt = receivedAt + core.config.emailTtlSeconds * 1000;
  const { raw, sender, subject, hasAttachments, searchText } = message;
  const emails: NewEmail[] = [...new Set(recipients)].map((address) => ({ address, sender, subject, hasAttachments, mailedBy, receivedAt, expiresAt, raw, searchText, envelope }));
  // what the verdicts read, taken before the store may hand the bytes on (only signed mail needs its body)
  const checked = envelope ? verdictsInput(raw) : null;
  const stored = await core.store.addEmails(emails);
  // webhook events are queued durably before the 250 too: a crash after it loses none
  await core.webhooks.enqueueFor(stored);
  for (const s of stored) {
    core.bus.publish(s.address, s.id).catch((err) => core.log.warn({ err }, 'wake-up publish failed; held polls will see the mail at their deadline'));
  }
  // the bytes in hand: the verdicts never read the message back (unless it was handed on to the store)
  if (envelope && checked && stored.length) core.authentication.scheduleMessage(stored[0].messageKey, checked, envelope);
  return stored;
}
