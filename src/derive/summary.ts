// The summary fast path (docs/house-style.md "The message model"): at ingest, before the 250, the bytes
// to store (oversized parts cut out) and what the list needs (sender, subject, has_attachments) plus
// the search text. A plainly structured message is read from its header block and leaves without a
// parser (fastSummary, cheap enough for the event loop); anything else is parsed in full on the
// summary lane of the worker pool. Never throws: a message the parser cannot take apart still gets
// its defined fallback.
import { decodeWords } from 'postal-mime';
import { cutOversizedParts, simpleLeaves, type Leaf } from '../domain/mime-cut.ts';
import { searchForm, SEARCH_TEXT_MAX_CHARS } from '../domain/search.ts';
import { capSummary, headerBlock, headerValue, keptAttachments, MAX_HEADER_VALUE, oneLine, parseHead, parseMime, roughText, type ParseLimits, type PmEmail } from './mime.ts';

export type { ParseLimits } from './mime.ts';

/** What the 250 needs: the summary fields, and the bytes to store (oversized parts cut out). */
export interface MessageSummary {
  raw: Uint8Array;
  sender: string;
  subject: string;
  hasAttachments: boolean;
  /** The body's search text (domain/search.ts): what the `text` filter reads, kept beside the message. */
  searchText: string;
}

const summaryOf = (email: PmEmail, limits: ParseLimits) => ({
  sender: capSummary(headerValue(email, 'from')),
  subject: capSummary(oneLine(email.subject ?? '')),
  hasAttachments: keptAttachments(email, limits).kept.length > 0,
  searchText: searchTextOf(email),
});

// ---- the search text (domain/search.ts): made at ingest, linear in what it reads ----

/** Encoded bytes of one body part read for the search text (HTML carries markup, so more of it). */
const SEARCH_SOURCE_TEXT_BYTES = 256 * 1024;
const SEARCH_SOURCE_HTML_BYTES = 1024 * 1024;
/** Text gathered from the parts before it is put in search form (which keeps at most half of it). */
const SEARCH_GATHER_CHARS = 2 * SEARCH_TEXT_MAX_CHARS;

/** The search text of a fully parsed message: its plain text, or else its HTML's words. */
export function searchTextOf(email: PmEmail): string {
  const text = email.text ? email.text : email.html ? roughText(email.html) : '';
  return searchForm(text);
}

const decoders = new Map<string, TextDecoder>();
/** A decoder for a charset label as postal-mime picks one: the label, else windows-1252 (utf-8 when absent). */
function decoderFor(charset: string): TextDecoder {
  const label = charset || 'utf-8';
  let d = decoders.get(label);
  if (d) return d;
  try {
    d = new TextDecoder(label);
  } catch {
    d = new TextDecoder('windows-1252');
  }
  if (decoders.size < 64) decoders.set(label, d); // labels are the sender's: a bounded cache
  return d;
}

const hexValue = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);

/** Quoted-printable, decoded in one pass (soft line breaks dropped, a stray `=` kept). */
export function decodeQuotedPrintable(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(b.byteLength);
  let o = 0;
  for (let i = 0; i < b.byteLength; i++) {
    const c = b[i];
    if (c !== 0x3d) {
      out[o++] = c;
      continue;
    }
    let j = i + 1;
    while (j < b.byteLength && (b[j] === 0x20 || b[j] === 0x09)) j++; // transport padding before a soft break
    if (b[j] === 0x0d && b[j + 1] === 0x0a) {
      i = j + 1;
      continue;
    }
    if (b[j] === 0x0a) {
      i = j;
      continue;
    }
    const hi = hexValue(b[i + 1]);
    const lo = hexValue(b[i + 2]);
    if (hi >= 0 && lo >= 0) {
      out[o++] = hi * 16 + lo;
      i += 2;
    } else out[o++] = c;
  }
  return out.subarray(0, o);
}

/** One inline part's text: the first bytes of its body decoded (transfer encoding, charset); HTML as words. */
function leafText(buf: Buffer, leaf: Leaf, html: boolean): string {
  const body = buf.subarray(leaf.bodyStart, Math.min(leaf.bodyEnd, leaf.bodyStart + (html ? SEARCH_SOURCE_HTML_BYTES : SEARCH_SOURCE_TEXT_BYTES)));
  const bytes = leaf.encoding === 'base64' ? Buffer.from(body.toString('latin1'), 'base64')
    : leaf.encoding === 'quoted-printable' ? decodeQuotedPrintable(body)
    : body;
  const text = decoderFor(leaf.charset).decode(bytes);
  if (html) return roughText(text);
  return leaf.delsp ? text.replace(/ \r?\n/g, '') : text;
}

/**
 * The search text of a plainly structured message from its leaves (no parser), assembled the way
 * postal-mime assembles its text: the inline text parts in order, where a multipart/alternative
 * counts as one part that gives its plain text, or its HTML as words when it has no plain text. The
 * same text the full parse gives, up to white space and how HTML becomes words
 * (test/smtp/summary.test.ts compares them on the corpus).
 */
export function leavesSearchText(raw: Uint8Array, leaves: Leaf[]): string {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const inline = leaves.filter((l) => !l.removed && !l.empty && l.disposition !== 'attachment' && (l.type === 'text/plain' || l.type === 'text/html'));
  const groupHasPlain = new Set(inline.filter((l) => l.type === 'text/plain' && l.alternative >= 0).map((l) => l.alternative));
  let text = '';
  for (const leaf of inline) {
    if (text.length >= SEARCH_GATHER_CHARS) break;
    const html = leaf.type === 'text/html';
    if (html && leaf.alternative >= 0 && groupHasPlain.has(leaf.alternative)) continue; // its alternative has plain text
    text += (text ? '\n' : '') + leafText(buf, leaf, html);
  }
  return searchForm(text);
}

/** The search text of a message the parser could not take apart: its body as received, as text. */
function rawSearchText(raw: Uint8Array): string {
  return searchForm(new TextDecoder('utf-8', { fatal: false }).decode(headerBlock(raw).body.subarray(0, SEARCH_SOURCE_TEXT_BYTES)));
}

/**
 * Whether a plainly structured message has an attachment postal-mime would report and keep, decided
 * from its leaves alone, or null when they cannot tell (then it is parsed in full). Every leaf inline
 * text: none. A leaf that is not inline text, not an inline message/rfc822 (parsed as a message), not
 * empty and not cut out: one (the cut already removed every part over the size limit).
 */
function attachmentsOf(leaves: Leaf[]): boolean | null {
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

/**
 * The summary of a plainly structured message (see attachmentsOf), read from
 * its top header block the way postal-mime reads it (lines to LF, trailing CRs dropped, UTF-8,
 * folding on SP/HTAB, first From and Subject, encoded words decoded), without decoding any body.
 * Null when the message is not that simple: then it is parsed in full. test/smtp/summary.test.ts
 * checks both ways agree on every message of the corpus.
 */
export function fastSummary(raw: Uint8Array): Omit<MessageSummary, 'raw'> | null {
  const leaves = simpleLeaves(raw);
  const decided = leaves ? attachmentsOf(leaves) : null;
  if (decided === null || !leaves) return null;
  const hasAttachments: boolean = decided;
  const lines: string[] = [];
  let at = 0;
  for (;;) {
    if (at >= raw.byteLength || at > FAST_MAX_HEAD) return at > FAST_MAX_HEAD ? null : finish(lines);
    let nl = raw.indexOf(0x0a, at);
    const stop = nl < 0 ? raw.byteLength : nl;
    let end = stop;
    while (end > at && raw[end - 1] === 0x0d) end--;
    if (end === at) {
      // a line of nothing (or only CRs) ends the header block; a CR inside a line stays as written
      let only = true;
      for (let i = at; i < stop; i++) if (raw[i] !== 0x0d) only = false;
      if (only) return finish(lines);
    }
    lines.push(headerDecoder.decode(raw.subarray(at, end)));
    if (nl < 0) return finish(lines);
    at = nl + 1;
  }
  function finish(headLines: string[]): Omit<MessageSummary, 'raw'> {
    let from: string | null = null;
    let subject: string | null = null;
    for (let i = 0; i < headLines.length && (from === null || subject === null); i++) {
      let line = headLines[i];
      while (i + 1 < headLines.length && /^[ \t]/.test(headLines[i + 1])) line += headLines[++i];
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
      searchText: leavesSearchText(raw, leaves!),
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
      return { raw, ...summaryOf(head, limits), hasAttachments: false, searchText: rawSearchText(raw) };
    } catch {
      return { raw, sender: '', subject: '', hasAttachments: false, searchText: rawSearchText(raw) };
    }
  }
}

