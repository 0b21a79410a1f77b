// The summary fast path (docs/house-style.md "The message model"): at ingest, before the 250, the bytes
// to store (oversized parts cut out) and what the list needs (sender, subject, has_attachments); the
// search text is made when first needed (search-text.ts), not here. A plainly structured message is read from its header block and leaves without a
// parser (fastSummary, cheap enough for the event loop); anything else is parsed in full on the
// summary lane of the worker pool. Never throws: a message the parser cannot take apart still gets
// its defined fallback.
import { decodeWords } from 'postal-mime';
import { cutOversizedParts, simpleLeaves, type Leaf } from '../domain/mime-cut.ts';
import { capSummary, headerBlock, headerValue, keptAttachments, MAX_HEADER_VALUE, oneLine, parseHead, parseMime, type ParseLimits, type PmEmail } from './mime.ts';

export type { ParseLimits } from './mime.ts';

/** What the 250 needs: the summary fields, and the bytes to store (oversized parts cut out). */
export interface MessageSummary {
  raw: Uint8Array;
  sender: string;
  subject: string;
  hasAttachments: boolean;
}

const summaryOf = (email: PmEmail, limits: ParseLimits) => ({
  sender: capSummary(headerValue(email, 'from')),
  subject: capSummary(oneLine(email.subject ?? '')),
  hasAttachments: keptAttachments(email, limits).kept.length > 0,
});

/**
 * Whether a plainly structured message has an attachment postal-mime would report and keep, decided
 * from its leaves alone, or null when they cannot tell (then it is parsed in full). Every leaf inline
 * text: none. A leaf that is not inline text, not an inline message/rfc822 (parsed as a message), not
 * empty and not cut out: one (the cut already removed every part over the size limit).
 */
export function attachmentsOf(leaves: Leaf[]): boolean | null {
  const inlineText = (l: Leaf) => (l.type === 'text/plain' || l.type === 'text/html') && l.disposition !== 'attachment';
  if (leaves.every(inlineText)) return false;
  if (leaves.some((l) => l.type === 'message/rfc822' || l.removed || (!inlineText(l) && l.empty))) return null;
  return true;
}

const headerDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
const isWsp = (c: number) => c === 0x20 || c === 0x09;
const trimWsp = (s: string) => {
  let a = 0;
  let b = s.length;
  while (a < b && isWsp(s.charCodeAt(a))) a++;
  while (b > a && isWsp(s.charCodeAt(b - 1))) b--;
  return s.slice(a, b);
};
const FAST_MAX_HEAD = 64 * 1024;

/** Whether the bytes at `at` are `word` (lowercase ASCII), in any case. */
function wordAt(raw: Uint8Array, at: number, end: number, word: string): boolean {
  if (end - at < word.length) return false;
  for (let i = 0; i < word.length; i++) if ((raw[at + i] | 0x20) !== word.charCodeAt(i)) return false;
  return true;
}

/**
 * The summary of a plainly structured message (see attachmentsOf), read from
 * its top header block the way postal-mime reads it (lines to LF, trailing CRs dropped, UTF-8,
 * folding on SP/HTAB, first From and Subject, encoded words decoded), without decoding any body.
 * Only the lines of a field that may be From or Subject are decoded (a byte test of its name): the
 * other headers stay bytes. Null when the message is not that simple: then it is parsed in full.
 * test/smtp/summary.test.ts checks both ways agree on every message of the corpus.
 */
export function fastSummary(raw: Uint8Array): Omit<MessageSummary, 'raw'> | null {
  const leaves = simpleLeaves(raw);
  const decided = leaves ? attachmentsOf(leaves) : null;
  if (decided === null) return null;
  const hasAttachments: boolean = decided;
  /** Each header line's start and end (trailing CRs dropped), in pairs. */
  const bounds: number[] = [];
  let at = 0;
  for (;;) {
    if (at >= raw.byteLength || at > FAST_MAX_HEAD) return at > FAST_MAX_HEAD ? null : finish(bounds);
    const nl = raw.indexOf(0x0a, at);
    let end = nl < 0 ? raw.byteLength : nl;
    while (end > at && raw[end - 1] === 0x0d) end--;
    // a line of nothing (or only CRs) ends the header block; a CR inside a line stays as written
    if (end === at) return finish(bounds);
    bounds.push(at, end);
    if (nl < 0) return finish(bounds);
    at = nl + 1;
  }
  function finish(lines: number[]): Omit<MessageSummary, 'raw'> {
    let from: string | null = null;
    let subject: string | null = null;
    for (let i = 0; i < lines.length && (from === null || subject === null); i += 2) {
      const first = i;
      while (i + 2 < lines.length && isWsp(raw[lines[i + 2]])) i += 2; // its folded lines
      // a field named From or Subject starts so (after SP/HTAB), or its first line is blank: else it is neither
      let c = lines[first];
      const firstEnd = lines[first + 1];
      while (c < firstEnd && isWsp(raw[c])) c++;
      if (c < firstEnd && !wordAt(raw, c, firstEnd, 'from') && !wordAt(raw, c, firstEnd, 'subject')) continue;
      let line = '';
      for (let j = first; j <= i; j += 2) line += headerDecoder.decode(raw.subarray(lines[j], lines[j + 1]));
      const sep = line.indexOf(':');
      const key = trimWsp(sep < 0 ? line : line.slice(0, sep)).toLowerCase();
      if (key !== 'from' && key !== 'subject') continue;
      const value = sep < 0 ? '' : trimWsp(line.slice(sep + 1).replace(/[\r\n]+/g, ' '));
      if (key === 'from' && from === null) from = value;
      if (key === 'subject' && subject === null) subject = value;
    }
    return {
      sender: capSummary(from === null ? '' : oneLine(decodeWords(from.slice(0, MAX_HEADER_VALUE)))),
      subject: capSummary(oneLine(subject ? decodeWords(subject) : '')),
      hasAttachments,
    };
  }
}

/** At ingest: the bytes to store and the summary fields. */
export async function summarize(received: Uint8Array, limits: ParseLimits): Promise<MessageSummary> {
  const { raw } = cutOversizedParts(received, limits.maxAttachmentBytes);
  const fast = fastSummary(raw);
  if (fast) return { raw, ...fast };
  try {
    return { raw, ...summaryOf(await parseMime(raw), limits) };
  } catch {
    // too deep, too many headers, or broken beyond repair: the header block alone, and no attachments
    try {
      const head = await parseHead(headerBlock(raw).head);
      return { raw, ...summaryOf(head, limits), hasAttachments: false };
    } catch {
      return { raw, sender: '', subject: '', hasAttachments: false };
    }
  }
}

