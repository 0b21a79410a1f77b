// read_email's `body` (spec: read_email body rules 1-3): which part is used, how HTML becomes text,
// the 10,000-character cut. Pure functions of the stored email.
import { htmlToText } from './html.ts';
import { cut, neutraliseMarkers, normaliseNewlines, stripInvisible } from './untrusted.ts';

/** Spec: the body is cut at 10,000 characters. */
export const BODY_MAX_CHARS = 10_000;

/** Text beyond this many characters is dropped before hygiene (it is past the cut anyway). */
const PRE_CUT_CHARS = 100_000;

/** Phrases of "this message is really in HTML" notices. */
const STUB_PHRASES: RegExp[] = [
  /\b(?:view|read|see|open|display)\b[^.\n]{0,40}\b(?:in|on|with|using)\s+(?:a|an|your|the)?\s*(?:web\s*)?browser\b/i,
  /\b(?:view|read|see|open)\b[^.\n]{0,30}\bonline\b/i,
  /\b(?:web|online|browser|html)\s+version\b/i,
  /\bas\s+an?\s+web\s*page\b/i,
  /\b(?:does\s*n[o']t|cannot|can\s*n[o']t|unable\s+to|not\s+able\s+to)\s+(?:support|display|show|render|read|view|see)\b[^.\n]{0,30}\b(?:html|e-?mail|message|newsletter)\b/i,
  /\bhtml[-\s](?:capable|compatible|enabled|e-?mail|mail|viewer|reader)\b/i,
  /\b(?:enable|requires?|needs?|switch\s+to)\s+(?:an?\s+)?html\b/i,
  /\b(?:trouble|problems?|difficult(?:y|ies))\s+(?:viewing|reading|displaying|seeing)\b/i,
];

/** Letters and digits of a text once URLs are removed: what a reader actually gets from it. */
function withoutUrls(text: string): string {
  return text.replace(/\b(?:https?|ftp|mailto):[^\s<>()]+|\bwww\.[^\s<>()]+/gi, ' ').replace(/\s+/g, ' ').trim();
}

/**
 * The stub rule (spec: read_email body rule 1). When the email also has an HTML part, its plain-text
 * part is a stub, and the HTML part is used instead, if the text part (URLs removed, whitespace
 * collapsed)
 *   1. has fewer than 20 letters or digits (empty, a lone link, a line of dashes), or
 *   2. is at most 300 characters and contains a view-in-browser phrase ("view this email in your
 *      browser", "view online", "web version", "your email client cannot display HTML", ...).
 * A longer text part that merely starts with such a line is a real text version and is used.
 */
export function isStubTextPart(text: string): boolean {
  if (text.length > 20_000) return false; // far past any notice; not worth scanning
  const plain = withoutUrls(stripInvisible(text));
  if ((plain.match(/[\p{L}\p{N}]/gu)?.length ?? 0) < 20) return true;
  return plain.length <= 300 && STUB_PHRASES.some((re) => re.test(plain));
}

export type BodySource = 'text' | 'html' | 'none';

/** Which part of the email the body comes from, and its raw text (before hygiene and the cut). */
export function chooseBody(textBody: string | null, htmlBody: string | null): { source: BodySource; text: string } {
  const hasHtml = htmlBody !== null && htmlBody.trim() !== '';
  if (textBody !== null && textBody.trim() !== '' && !(hasHtml && isStubTextPart(textBody))) return { source: 'text', text: textBody };
  if (hasHtml) {
    // only the first BODY_MAX_CHARS of text are kept: a prefix of a long HTML part is enough
    const text = htmlToText(htmlBody, BODY_MAX_CHARS + 1000);
    // an HTML part with no readable text (only images, say): the stub still says more than nothing
    if (text.trim() === '' && textBody !== null && textBody.trim() !== '') return { source: 'text', text: textBody };
    return { source: 'html', text };
  }
  return { source: textBody === null ? 'none' : 'text', text: textBody ?? '' };
}

export interface RenderedBody {
  body: string;
  truncated: boolean;
  source: BodySource;
}

/**
 * The body as given to agents: chosen part, newlines as LF, invisible characters removed, lines that
 * imitate a body marker neutralised, trailing blank space trimmed, then cut at BODY_MAX_CHARS.
 */
export function renderBody(textBody: string | null, htmlBody: string | null): RenderedBody {
  const { source, text } = chooseBody(textBody, htmlBody);
  // hygiene only on a generous prefix: a 30 MB text part would cost a second for 10,000 characters
  const pre = cut(text, PRE_CUT_CHARS);
  const clean = neutraliseMarkers(stripInvisible(normaliseNewlines(pre))).replace(/[ \t]+$/gm, '').replace(/\n{4,}/g, '\n\n\n').trim();
  const truncated = clean.length > BODY_MAX_CHARS || pre.length < text.length;
  return { body: truncated ? cut(clean, BODY_MAX_CHARS) : clean, truncated, source };
}
