// What every derivation reads from a message with postal-mime: the parse itself (its options in one
// place), header values on one line, the header block, kept attachments, safe filenames. Shared by
// the summary (summary.ts), the search text (search-text.ts) and the views (message.ts).
import PostalMime, { decodeWords } from 'postal-mime';
import type { Attachment as PmAttachment, Email as PmEmail } from 'postal-mime';
import { REMOVED_MARK } from '../domain/mime-cut.ts';

export { MAX_FALLBACK_BODY, normalizeContentType, safeFilename, toBytes } from './parts.ts';

export type { PmAttachment, PmEmail };

export interface ParseLimits {
  maxAttachmentBytes: number;
  maxAttachments: number;
}

/** Summary fields are cut at this many characters (docs/decisions.md "Caps"): lists stay small. */
export const SUMMARY_MAX_CHARS = 1000;
export const MAX_HEADER_VALUE = 64 * 1024;
export const MAX_FALLBACK_HEAD = 1024 * 1024;
export const stripNul = (s: string | undefined | null): string | null => (s == null ? null : s.replace(/\u0000/g, ''));
export const capSummary = (s: string) => (s.length > SUMMARY_MAX_CHARS ? `${s.slice(0, SUMMARY_MAX_CHARS - 1)}…` : s);
export const oneLine = (s: string) => s.replace(/\r?\n[ \t]*/g, ' ').replace(/[\r\n]/g, ' ').replace(/\u0000/g, '');

/** The whole parse of a message (nesting up to 256 levels; attachments as bytes). Throws when it cannot. */
export const parseMime = (raw: Uint8Array): Promise<PmEmail> => PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 });
/** The parse of a header block alone (postal-mime's default nesting). */
export const parseHead = (head: Uint8Array): Promise<PmEmail> => PostalMime.parse(head, { attachmentEncoding: 'arraybuffer' });

/** A header's value as one line, encoded words decoded ('' when absent). */
export function headerValue(email: PmEmail, key: string): string {
  const h = email.headers.find((x) => x.key === key);
  return h ? oneLine(decodeWords(h.value.slice(0, MAX_HEADER_VALUE))) : '';
}

/** The attachments postal-mime found, minus cut-out parts, over-limit ones and those past the cap. */
export function keptAttachments(email: PmEmail, limits: ParseLimits): { kept: PmAttachment[]; dropped: number } {
  const kept: PmAttachment[] = [];
  let dropped = 0;
  for (const a of email.attachments) {
    const size = typeof a.content === 'string' ? a.content.length : a.content.byteLength;
    if (a.description === REMOVED_MARK || size > limits.maxAttachmentBytes || kept.length >= limits.maxAttachments) dropped++;
    else kept.push(a);
  }
  return { kept, dropped };
}

export { headerBlock } from './head.ts';

