// A message taken apart once for its views (registry.ts): the one parse every view of the `parse`
// stage reads, made on a derivation worker. Three ways, one shape: the full parse (with or without
// its HTML, when the HTML's budget ran out), the header block alone (the parser failed), and none at
// all (`minimal`: every budget ran out; the views then take their fallbacks).
import { BODY_MAX_CHARS, renderBody, type RenderedBody } from '../domain/agent-body.ts';
import { cut, normaliseNewlines } from '../domain/untrusted.ts';
import { HTML_CHECK_MAX_CHARS } from '../domain/html-check.ts';
import { htmlWords, sanitizeEmailHtml } from '../domain/html.ts';
import type { DerivationOutcome, HeaderField } from '../domain/message.ts';
import {
  headerBlock, headerValue, keptAttachments, MAX_FALLBACK_BODY, MAX_FALLBACK_HEAD, MAX_HEADER_VALUE, oneLine, parseHead, parseMime, stripNul,
  type ParseLimits, type PmAttachment, type PmEmail,
} from './mime.ts';

/** Options of one derivation; the service derives again without HTML when the first try runs out of time. */
export interface DeriveOptions {
  html: boolean;
}

/** What the views of the `parse` stage read. */
export interface ParsedMessage {
  /** No parser ran (every budget ran out): views take their fallbacks. */
  minimal: boolean;
  outcome: DerivationOutcome;
  /** A header's value on one line, encoded words decoded; '' when absent. */
  header(key: string): string;
  /** Every header field in the order received ([] when the header block could not be parsed). */
  headers: HeaderField[];
  subject: string;
  textBody: string | null;
  /** Sanitized; null without an HTML part, or when its budget ran out. */
  htmlBody: string | null;
  /** The HTML part as written, cut just past HTML_CHECK_MAX_CHARS; null when htmlBody is. */
  htmlSource: string | null;
  /** The message has an HTML part (kept or not). */
  hasHtml: boolean;
  /** Kept attachments (part i of the stored views is attachments[i]) and how many were not kept. */
  attachments: PmAttachment[];
  attachmentsDropped: number;
  /** read_email's body (domain/agent-body.ts), made once on first use. */
  agent(): RenderedBody;
  /** The sanitized HTML's words (domain/html.ts htmlWords), made once on first use; null when htmlBody is. */
  htmlWords(): string | null;
}

function fromEmail(email: PmEmail | null, parts: { textBody: string | null; html: string | null; hasHtml: boolean; kept: PmAttachment[]; dropped: number; outcome: DerivationOutcome }): ParsedMessage {
  const htmlBody = parts.html === null ? null : sanitizeEmailHtml(parts.html);
  let agent: RenderedBody | null = null;
  let words: string | null | undefined;
  return {
    minimal: false,
    outcome: parts.outcome,
    header: (key) => (email ? headerValue(email, key) : ''),
    headers: email ? email.headers.map((h) => ({ name: h.originalKey || h.key, value: oneLine(h.value.slice(0, MAX_HEADER_VALUE)) })) : [],
    subject: email ? oneLine(email.subject ?? '') : '',
    textBody: parts.textBody,
    htmlBody,
    htmlSource: parts.html === null ? null : parts.html.slice(0, HTML_CHECK_MAX_CHARS + 1),
    hasHtml: parts.hasHtml,
    attachments: parts.kept,
    attachmentsDropped: parts.dropped,
    agent: () => (agent ??= renderBody(parts.textBody, htmlBody)),
    htmlWords: () => (words === undefined ? (words = htmlBody === null ? null : htmlWords(htmlBody)) : words),
  };
}

/** The body as received, as text (at most MAX_FALLBACK_BODY bytes of it). */
const bodyText = (raw: Uint8Array) => stripNul(new TextDecoder('utf-8', { fatal: false }).decode(headerBlock(raw).body.subarray(0, MAX_FALLBACK_BODY)));

/** The full parse; without `options.html`, an HTML part is dropped and an HTML-only message keeps its words. */
export async function parseForViews(raw: Uint8Array, limits: ParseLimits, options: DeriveOptions = { html: true }): Promise<ParsedMessage> {
  let email: PmEmail;
  try {
    email = await parseMime(raw);
  } catch {
    return headerOnlyMessage(raw, 'parse_failed');
  }
  const { kept, dropped } = keptAttachments(email, limits);
  const html = options.html ? stripNul(email.html) : null;
  // without the HTML (its budget ran out), an HTML-only message keeps its words (its first MAX_FALLBACK_BODY characters)
  const textBody = stripNul(email.text) ?? (!options.html && email.html ? htmlWords(email.html.slice(0, MAX_FALLBACK_BODY)) : null);
  const outcome = options.html || email.html == null ? 'ok' : 'html_over_budget';
  return fromEmail(email, { textBody, html, hasHtml: email.html != null, kept, dropped, outcome });
}

/** The fallback when the parser fails: the header block's fields and the body as received, as text. */
export async function headerOnlyMessage(raw: Uint8Array, outcome: DerivationOutcome): Promise<ParsedMessage> {
  let email: PmEmail | null = null;
  try {
    email = await parseHead(headerBlock(raw).head.subarray(0, MAX_FALLBACK_HEAD));
  } catch {
    email = null;
  }
  return fromEmail(email, { textBody: bodyText(raw), html: null, hasHtml: false, kept: [], dropped: 0, outcome });
}

/** The last fallback, made without any parser: the body as received, as text; views take their fallbacks. */
export function minimalMessage(raw: Uint8Array): ParsedMessage {
  const text = bodyText(raw) ?? '';
  const body = cut(normaliseNewlines(text), BODY_MAX_CHARS); // no hygiene pass: linear, and cut first
  return {
    minimal: true, outcome: 'parse_over_budget', header: () => '', headers: [], subject: '', textBody: text, htmlBody: null, htmlSource: null,
    hasHtml: false, attachments: [], attachmentsDropped: 0, agent: () => ({ body, truncated: body.length < text.length, source: 'text' }), htmlWords: () => null,
  };
}
