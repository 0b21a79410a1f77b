// MIME → the spec's fields (postal-mime). Never throws: a message the parser cannot take apart is
// still stored, with its headers and its raw body as text (a defined outcome for broken mail).
import PostalMime, { decodeWords } from 'postal-mime';
import type { Attachment as PmAttachment, Email as PmEmail } from 'postal-mime';
import { sanitizeEmailHtml } from '../domain/html.ts';
import type { NewAttachment, NewEmail } from '../store/store.ts';

/** A message as parsed, before it is addressed to an inbox and timed. */
export type ParsedMessage = Omit<NewEmail, 'address' | 'mailedBy' | 'receivedAt' | 'expiresAt'>;

export interface ParseLimits {
  maxAttachmentBytes: number;
  maxAttachments: number;
}

const MAX_HEADER_VALUE = 64 * 1024;
const MAX_FALLBACK_BODY = 1024 * 1024;
// C0 controls (but tab), DEL, C1 controls, bidi overrides/isolates, zero-width and BOM: never in a filename
const UNSAFE_FILENAME_CHARS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

const stripNul = (s: string | undefined | null): string | null => (s == null ? null : s.replace(/\u0000/g, ''));
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

function fromParsed(email: PmEmail, limits: ParseLimits): ParsedMessage {
  const attachments: NewAttachment[] = [];
  for (const a of email.attachments) {
    if (attachments.length >= limits.maxAttachments) break;
    const content = toBytes(a.content);
    if (content.byteLength > limits.maxAttachmentBytes) continue; // spec: over 5 MB is never stored; the rest is kept
    const contentType = normalizeContentType(a.mimeType);
    attachments.push({ filename: safeFilename(a.filename, contentType, attachments.length), contentType, content });
  }
  const html = stripNul(email.html);
  const msgId = headerValue(email, 'message-id');
  return {
    sender: headerValue(email, 'from'),
    subject: oneLine(email.subject ?? ''),
    to: headerValue(email, 'to'),
    cc: headerValue(email, 'cc'),
    messageId: msgId || null,
    headers: email.headers.map((h) => ({ name: h.originalKey || h.key, value: oneLine(h.value.slice(0, MAX_HEADER_VALUE)) })),
    textBody: stripNul(email.text),
    htmlBody: html == null ? null : sanitizeEmailHtml(html),
    attachments,
  };
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

export async function parseMessage(raw: Uint8Array, limits: ParseLimits): Promise<ParsedMessage> {
  try {
    const email = await PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 });
    return fromParsed(email, limits);
  } catch {
    // Too deep, too many headers, or broken beyond repair: keep the headers and the raw body as text.
    const { head, body } = headerBlock(raw);
    let parsed: ParsedMessage;
    try {
      parsed = fromParsed(await PostalMime.parse(head, { attachmentEncoding: 'arraybuffer' }), limits);
    } catch {
      parsed = { sender: '', subject: '', to: '', cc: '', messageId: null, headers: [], textBody: null, htmlBody: null, attachments: [] };
    }
    const text = new TextDecoder('utf-8', { fatal: false }).decode(body.subarray(0, MAX_FALLBACK_BODY));
    return { ...parsed, textBody: stripNul(text), htmlBody: null, attachments: [] };
  }
}
