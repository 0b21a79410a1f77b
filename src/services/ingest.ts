// Ingest: one received message and its served recipients → the message stored once, one row per
// inbox → wake-ups. Resolves only after the store made it durable; the SMTP 250 waits on it.
// The adapters (smtp/, services/provider-mail.ts) hand over the bytes as received: the summary, and
// where it is made (here on the event loop, or on the pool's `summary` lane), are this file's, and
// so is what the authentication verdicts read of the message.
import { verdictsInput } from '../derive/authentication-view.ts';
import type { MessageSummary } from '../derive/summary.ts';
import type { MessageEnvelope, NewEmail, StoredEmail } from '../store/store.ts';
import type { Core } from './core.ts';

/** Messages up to this size may be summarized on the event loop (a linear scan: tens of µs). */
export const FAST_HERE_BYTES = 128 * 1024;

export interface Ingest {
  /**
   * Summarizes a message as received, then stores it (ingest below). A small, plainly structured
   * message is summarized right here (one linear pass over at most FAST_HERE_BYTES, no body
   * decoded): a worker round trip would cost more than the work. Anything else goes to the
   * `summary` lane, which `raw` is handed to when it owns its buffer (an unpooled one).
   */
  receive(raw: Uint8Array, recipients: string[], mailedBy: string | null, envelope?: MessageEnvelope): Promise<StoredEmail[]>;
}

export function createIngest(core: Core): Ingest {
  const summaries = core.workers.summary;
  // the summary module is loaded on the first message (its fast path then runs without a wait)
  let loading: Promise<typeof import('../derive/summary.ts')> | null = null;
  let fastSummary: typeof import('../derive/summary.ts').fastSummary | null = null;
  return {
    async receive(raw, recipients, mailedBy, envelope) {
      let fast: Omit<MessageSummary, 'raw'> | null = null;
      if (raw.byteLength <= FAST_HERE_BYTES) {
        fastSummary ??= (await (loading ??= import('../derive/summary.ts'))).fastSummary;
        fast = fastSummary(raw);
      }
      const summary = fast ? { raw, ...fast } : await summaries.run('summarize', raw, core.config);
      return ingest(core, summary, recipients, mailedBy, envelope);
    },
  };
}

/**
 * `envelope`: the SMTP session's client IP, HELO name and MAIL FROM, kept with the message for its
 * authentication verdicts, which are then computed in the background (never before the 250).
 */
export async function ingest(core: Core, message: MessageSummary, recipients: string[], mailedBy: string | null, envelope?: MessageEnvelope): Promise<StoredEmail[]> {
  const receivedAt = core.clock.now();
  const expiresAt = receivedAt + core.config.emailTtlSeconds * 1000;
  const { raw, sender, subject, hasAttachments } = message;
  // no search text: it is made on the first search that meets the message (services/views.ts searchText)
  const emails: NewEmail[] = [...new Set(recipients)].map((address) => ({ address, sender, subject, hasAttachments, mailedBy, receivedAt, expiresAt, raw, envelope }));
  // what the verdicts read, a copy of its own (only signed mail needs its body): the store takes the
  // received bytes over (they move to its writer thread), so none of them waits here for the verdicts;
  // none made while the verdicts' queue is full (a read asks for them later), and none of signed mail
  // they would not hold (over their byte budget: they read it back from the store when its turn comes)
  const input = envelope && core.authentication.accepting ? verdictsInput(raw) : null;
  const checked = input !== raw ? input : core.authentication.holds(raw.byteLength) ? new Uint8Array(raw) : new Uint8Array(0);
  // the mail and its webhook events in one write, before the 250: both stored or neither
  const stored = await core.webhooks.addWithEvents(emails, (events) => core.store.addEmails(emails, events));
  for (const s of stored) {
    core.bus.publish(s.address, s.id).catch((err) => core.log.warn({ err }, 'wake-up publish failed; held polls will see the mail at their deadline'));
  }
  // the bytes in hand: the verdicts never read the message back
  if (envelope && checked && stored.length) core.authentication.scheduleMessage(stored[0].messageKey, checked, envelope);
  return stored;
}
