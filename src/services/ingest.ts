// Ingest: one parsed message and its served recipients → one stored copy per inbox → wake-ups.
// Resolves only after the store has made the copies durable; the SMTP 250 waits on it.
import type { ParsedMessage } from '../smtp/parse.ts';
import type { EmailSummary, NewEmail } from '../store/store.ts';
import type { Core } from './core.ts';

export async function ingest(core: Core, message: ParsedMessage, recipients: string[], mailedBy: string | null): Promise<EmailSummary[]> {
  const receivedAt = core.clock.now();
  const expiresAt = receivedAt + core.config.emailTtlSeconds * 1000;
  const emails: NewEmail[] = [...new Set(recipients)].map((address) => ({ ...message, address, mailedBy, receivedAt, expiresAt }));
  const stored = await core.store.addEmails(emails);
  for (const s of stored) {
    core.bus.publish(s.address, s.id).catch((err) => core.log.warn({ err }, 'wake-up publish failed; held polls will see the mail at their deadline'));
  }
  return stored;
}
