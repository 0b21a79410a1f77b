// MIME → the spec's fields (postal-mime), in two steps of the message model (ARCHITECTURE.md):
// summarize() at ingest (what the 250 and the list need) and deriveViews() on first read (bodies,
// sanitized HTML, attachments, the agent text). Both run in worker threads (parse-pool.ts) and never
// throw: a message the parser cannot take apart still gets its defined fallback.
import PostalMime, { decodeWords } from 'postal-mime';
import type { Attachment as PmAttachment, Email as PmEmail } from 'postal-mime';
import { sanitizeEmailHtml } from '../domain/html.ts';
import { HTML_CHECK_MAX_CHARS, htmlCheckError } from '../domain/html-check.ts';
import type { AttachmentMeta, MessageViews } from '../domain/message.ts';
import { cutOversizedParts, REMOVED_MARK, simpleLeaves, type Leaf } from '../domain/mime-cut.ts';
import { searchForm, SEARCH_TEXT_MAX_CHARS } from '../domain/search.ts';
import { extractCodes } from '../domain/extract/codes.ts';
import { extractLinks } from '../domain/extract/links.ts';
import { BODY_MAX_CHARS, renderBody } from '../domain/agent-body.ts';
import { cut, normaliseNewlines } from '../domain/untrusted.ts';

/** Bumped whenever deriveViews() changes what it produces: stored views of older versions are derived again. */
export const VIEWS_VERSION = 4;

export interface ParseLimits {
  maxAttachmentBytes: number;
  maxAttachments: number;
}

/** What the 250 needs: the summary fields, and the bytes to store (oversized parts cut out). */
export interface MessageSummary {
  raw: Uint8Array;
  sender: string;
  subject: string;
  hasAttachments: boolean;
  /** The body's search text (domain/search.ts): what the `text` filter reads, kept beside the message. */
  searchText: string;
}

/** The derived views and the bytes of each kept attachment (part i of the message). */
export interface DerivedMessage {
  views: MessageViews;
  parts: Uint8Array[];
  /**
   * The HTML part as the sender wrote it (before sanitizing), cut just past HTML_CHECK_MAX_CHARS, for
   * the compatibility check views.ts runs next on a worker of its own budget; absent without HTML.
   */
  htmlSource?: string;
}

/** Summary fields are cut at this many characters (docs/decisions.md "Caps"): lists stay small. */
export const SUMMARY_MAX_CHARS = 1000;
const MAX_HEADER_VALUE = 64 * 1024;
const MAX_FALLBACK_BODY = 1024 * 1024;
const MAX_FALLBACK_HEAD = 1024 * 1024;
// C0 controls (but tab), DEL, C1 controls, bidi overrides/isolates, zero-width and BOM: never in a filename
const UNSAFE_FILENAME_CHARS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

const stripNul = (s: string | undefined | null): string | null => (s == null ? null : s.replace(/\u0000/g, ''));
const capSummary = (s: string) => (s.length > SUMMARY_MAX_CHARS ? `${s.slice(0, SUMMARY_MAX_CHARS - 1)}…` : s);
const oneLine = (s: string) => s.replace(/\r?\n[ \t]*/g, ' ').replace(/[\r\n]/g, ' ').replace(/\u0000/g, '');

/** A filename that is safe to store and to offer for download: no path parts, controls or bidi tricks. */
export function safeFilename(name: string | null | undefined, contentType: string, index: number): string {
  let s = (name ?? '').replace(UNSAFE_FILENAME_CHARS, '');
  s = s.split(/[\\/]/).pop() ?? '';
  s = s.replace(/^[.\s]+/, '').replace(/[.\s]+$/, '').trim();
  if (s === '..' || s === '.') s = '';
  if (s.length > 200) {
    const dot = s.lastIndexOf('.');
    const ext = dot > 0 && s.length - dot <= 16 ? s.slice(dot) : '';
    s = s.slice(0, 200 - ext.length) + ext;
  }
  if (s) return s;
  const sub = contentType.split('/')[1]?.replace(/[^a-z0-9.+-]/gi, '') ?? '';
  const ext = contentType === 'message/rfc822' ? 'eml' : sub && sub.length <= 10 && !sub.startsWith('x-') ? sub : 'bin';
  return `attachment-${index + 1}.${ext}`;
}

const CT_RE = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/;
const normalizeContentType = (t: string | null | undefined) => {
  const v = (t ?? '').trim().toLowerCase();
  return CT_RE.test(v) ? v : 'application/octet-stream';
};

function toBytes(c: PmAttachment['content']): Uint8Array {
  if (typeof c === 'string') return new TextEncoder().encode(c);
  return c instanceof Uint8Array ? c : new Uint8Array(c);
}

function headerValue(email: PmEmail, key: string): string {
  const h = email.headers.find((x) => x.key === key);
  return h ? oneLine(decodeWords(h.value.slice(0, MAX_HEADER_VALUE))) : '';
}

/** The attachments postal-mime found, minus cut-out parts, over-limit ones and those past the cap. */
function keptAttachments(email: PmEmail, limits: ParseLimits): { kept: PmAttachment[]; dropped: number } {
  const kept: PmAttachment[] = [];
  let dropped = 0;
  for (const a of email.attachments) {
    const size = typeof a.content === 'string' ? a.content.length : a.content.byteLength;
    if (a.description === REMOVED_MARK || size > limits.maxAttachmentBytes || kept.length >= limits.maxAttachments) dropped++;
    else kept.push(a);
  }
  return { kept, dropped };
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
    return { raw, ...summaryOf(await PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 }), limits) };
  } catch {
    // too deep, too many headers, or broken beyond repair: the header block alone, and no attachments
    try {
      const head = await PostalMime.parse(headerBlock(raw).head, { attachmentEncoding: 'arraybuffer' });
      return { raw, ...summaryOf(head, limits), hasAttachments: false, searchText: rawSearchText(raw) };
    } catch {
      return { raw, sender: '', subject: '', hasAttachments: false, searchText: rawSearchText(raw) };
    }
  }
}

/** Options of one derivation; the pool retries without HTML when the first attempt runs out of time. */
export interface DeriveOptions {
  html: boolean;
}

function viewsOf(email: PmEmail, limits: ParseLimits, options: DeriveOptions): DerivedMessage {
  const { kept, dropped } = keptAttachments(email, limits);
  const attachments: AttachmentMeta[] = [];
  const parts: Uint8Array[] = [];
  kept.forEach((a, i) => {
    const content = toBytes(a.content);
    const contentType = normalizeContentType(a.mimeType);
    const cid = a.contentId ? a.contentId.trim().replace(/^<|>$/g, '').slice(0, 998) : '';
    attachments.push({ id: String(i + 1), filename: safeFilename(a.filename, contentType, i), contentType, sizeBytes: content.byteLength, contentId: cid || null });
    parts.push(content);
  });
  const html = options.html ? stripNul(email.html) : null;
  const htmlBody = html == null ? null : sanitizeEmailHtml(html);
  // without the HTML (its budget ran out), an HTML-only message keeps its words: tags dropped, linearly
  const textBody = stripNul(email.text) ?? (!options.html && email.html ? roughText(email.html) : null);
  const msgId = headerValue(email, 'message-id');
  const agent = renderBody(textBody, htmlBody);
  // the HTML as text for codes: the agent's text when it came from the HTML, else one linear pass
  // (a second HTML→text conversion would cost as much as the sanitizer)
  const htmlText = htmlBody === null ? null : agent.source === 'html' ? agent.body : roughText(htmlBody);
  const subject = oneLine(email.subject ?? '');
  const views: MessageViews = {
    version: VIEWS_VERSION,
    to: headerValue(email, 'to'),
    cc: headerValue(email, 'cc'),
    messageId: msgId || null,
    headers: email.headers.map((h) => ({ name: h.originalKey || h.key, value: oneLine(h.value.slice(0, MAX_HEADER_VALUE)) })),
    textBody,
    htmlBody,
    attachments,
    attachmentsDropped: dropped,
    agentBody: { body: agent.body, truncated: agent.truncated },
    codes: extractCodes({ subject, text: textBody, htmlText }),
    links: extractLinks({ html: htmlBody, text: textBody, listUnsubscribe: headerValue(email, 'list-unsubscribe') || null }),
    outcome: options.html || email.html == null ? 'ok' : 'html_over_budget',
    // filled in by views.ts from htmlSource; without the HTML (its budget ran out) there is nothing to check
    htmlCheck: email.html == null ? null : options.html ? null : htmlCheckError('html_over_budget'),
  };
  return html == null ? { views, parts } : { views, parts, htmlSource: html.slice(0, HTML_CHECK_MAX_CHARS + 1) };
}

/** Text of HTML without parsing it: tags and comments dropped, a few entities decoded, one pass. */
export function roughText(html: string): string {
  const src = html.length > MAX_FALLBACK_BODY ? html.slice(0, MAX_FALLBACK_BODY) : html;
  const lower = src.toLowerCase();
  let out = '';
  let i = 0;
  while (i < src.length) {
    const lt = src.indexOf('<', i);
    if (lt < 0) {
      out += src.slice(i);
      break;
    }
    out += src.slice(i, lt);
    const end = src.startsWith('<!--', lt) ? src.indexOf('-->', lt + 4) : src.indexOf('>', lt + 1);
    if (end < 0) break;
    const tag = src.slice(lt + 1, Math.min(end, lt + 12)).toLowerCase();
    if (/^\/?(p|div|br|tr|li|h[1-6]|table)\b/.test(tag)) out += '\n';
    else if (/^\/?(td|th)\b/.test(tag)) out += ' ';
    i = end + (src.startsWith('<!--', lt) ? 3 : 1);
    const raw = /^(style|script)\b/.exec(tag); // their content is not text
    if (raw) {
      const close = lower.indexOf(`</${raw[1]}`, i);
      i = close < 0 ? src.length : close;
    }
  }
  return out
    .replace(/&nbsp;/gi, ' ').replace(/&lt;/gi, '<').replace(/&gt;/gi, '>').replace(/&quot;/gi, '"').replace(/&#39;/g, "'").replace(/&amp;/gi, '&')
    .replace(/[ \t\r\f\v]+/g, ' ').replace(/ ?\n[\n ]*/g, '\n').trim();
}

/** The last fallback, made without any parser: no headers, the body as received, as text. */
export function minimalViews(raw: Uint8Array): DerivedMessage {
  const text = stripNul(new TextDecoder('utf-8', { fatal: false }).decode(headerBlock(raw).body.subarray(0, MAX_FALLBACK_BODY))) ?? '';
  const agent = cut(normaliseNewlines(text), BODY_MAX_CHARS);
  return {
    views: {
      version: VIEWS_VERSION, to: '', cc: '', messageId: null, headers: [], textBody: text, htmlBody: null, attachments: [], attachmentsDropped: 0,
      agentBody: { body: agent, truncated: agent.length < text.length }, codes: [], links: [], outcome: 'parse_over_budget',
    },
    parts: [],
  };
}

/** The fallback when the parser fails: the header block's fields and the body as received, as text. */
export async function fallbackViews(raw: Uint8Array, outcome: MessageViews['outcome']): Promise<DerivedMessage> {
  const { head, body } = headerBlock(raw);
  let email: PmEmail | null = null;
  try {
    email = await PostalMime.parse(head.subarray(0, MAX_FALLBACK_HEAD), { attachmentEncoding: 'arraybuffer' });
  } catch {
    email = null;
  }
  const text = stripNul(new TextDecoder('utf-8', { fatal: false }).decode(body.subarray(0, MAX_FALLBACK_BODY)));
  const views: MessageViews = {
    version: VIEWS_VERSION,
    to: email ? headerValue(email, 'to') : '',
    cc: email ? headerValue(email, 'cc') : '',
    messageId: (email && headerValue(email, 'message-id')) || null,
    headers: email ? email.headers.map((h) => ({ name: h.originalKey || h.key, value: oneLine(h.value.slice(0, MAX_HEADER_VALUE)) })) : [],
    textBody: text,
    htmlBody: null,
    attachments: [],
    attachmentsDropped: 0,
    agentBody: (({ body: b, truncated }) => ({ body: b, truncated }))(renderBody(text, null)),
    codes: extractCodes({ subject: email ? oneLine(email.subject ?? '') : '', text, htmlText: null }),
    links: extractLinks({ html: null, text, listUnsubscribe: (email && headerValue(email, 'list-unsubscribe')) || null }),
    outcome,
  };
  return { views, parts: [] };
}

/** Splits the header block off a raw message (for the fallback parse). */
function headerBlock(raw: Uint8Array): { head: Uint8Array; body: Uint8Array } {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  let end = buf.indexOf('\r\n\r\n');
  let skip = 4;
  const lf = buf.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    skip = 2;
  }
  if (end < 0) return { head: raw, body: new Uint8Array() };
  return { head: raw.subarray(0, end + skip), body: raw.subarray(end + skip) };
}

/** On first read: every view of the message. */
export async function deriveViews(raw: Uint8Array, limits: ParseLimits, options: DeriveOptions = { html: true }): Promise<DerivedMessage> {
  let email: PmEmail;
  try {
    email = await PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 });
  } catch {
    return fallbackViews(raw, 'parse_failed');
  }
  return viewsOf(email, limits, options);
}

/** Both steps on this thread, as the workers run them: the summary, then every view (tests, tools). */
export async function parseMessage(received: Uint8Array, limits: ParseLimits): Promise<MessageSummary & MessageViews & { parts: Uint8Array[] }> {
  const summary = await summarize(received, limits);
  const { views, parts } = await deriveViews(summary.raw, limits);
  return { ...summary, ...views, parts };
}
