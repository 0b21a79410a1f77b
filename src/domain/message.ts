// The message model (docs/house-style.md "The message model"): a received message is stored once, as
// received; everything a reader sees beyond the summary row is a derived view of those bytes,
// computed once per message (off the event loop, within a budget) and kept beside it.
import type { EmailSummary } from './summary.ts';
import type { Authentication } from './authentication.ts';
import type { CodeCandidate } from './extract/codes.ts';
import type { EmailLink } from './extract/links.ts';
import type { HtmlCheck } from './html-check.ts';
import type { SpamVerdict } from './spam.ts';

export interface HeaderField {
  name: string;
  value: string;
}

export interface AttachmentMeta {
  /** Unique within its email. */
  id: string;
  filename: string;
  contentType: string;
  sizeBytes: number;
  /** The part's Content-ID without angle brackets, or null. */
  contentId: string | null;
}

/** How a derivation ended: `ok`, or which budget ran out and which fallback was used. */
export type DerivationOutcome = 'ok' | 'html_over_budget' | 'parse_failed' | 'parse_over_budget';

/**
 * The derived views of one message (docs/decisions.md "Derived views"). `version` names the
 * derivation that made it: a stored document of an older version is derived again from the raw
 * message on its next read, so a new view works on mail already stored.
 */
export interface MessageViews {
  version: number;
  /** The versions of views past their first (derive/registry.ts); absent when every view is at 1. */
  versions?: Record<string, number>;
  to: string;
  cc: string;
  messageId: string | null;
  headers: HeaderField[];
  textBody: string | null;
  /** Sanitized (docs/security.md); null when the message has none or its budget ran out. */
  htmlBody: string | null;
  /** Kept attachments; the bytes of attachments[i] are part i of the message. */
  attachments: AttachmentMeta[];
  /** Attachments not kept: over 5 MB decoded, or past the 100th. */
  attachmentsDropped: number;
  /** read_email's body (spec: read_email body rules), cut at 10,000 characters. */
  agentBody: { body: string; truncated: boolean };
  /** Verification codes, best first (docs/extraction.md). */
  codes: CodeCandidate[];
  /** Links, the main action first (docs/extraction.md). */
  links: EmailLink[];
  outcome: DerivationOutcome;
  /** HTML compatibility (domain/html-check.ts); null without an HTML part; absent in fallbacks (= null). */
  htmlCheck?: HtmlCheck | null;
  /** spamd's verdict (derive/spamd.ts), made as the views were derived; null/absent when no spamd is configured. */
  spam?: SpamVerdict | null;
}

/** A whole email: its row, its message's views and its authentication verdicts (null until computed). */
export interface EmailFull extends EmailSummary, Omit<MessageViews, 'version' | 'outcome' | 'htmlCheck' | 'spam'> {
  htmlCheck: HtmlCheck | null;
  spam: SpamVerdict | null;
  authentication: Authentication | null;
}
