// What every derivation reads from a message with postal-mime: the parse itself (its options in one
// place), header values on one line, the header block, kept attachments, safe filenames, and HTML as
// rough text (one linear pass, no parser). Shared by the summary (summary.ts) and the views (message.ts).
import PostalMime, { decodeWords } from 'postal-mime';
import type { Attachment as PmAttachment, Email as PmEmail } from 'postal-mime';
import { REMOVED_MARK } from '../domain/mime-cut.ts';

export type { PmAttachment, PmEmail };

export interface ParseLimits {
  maxAttachmentBytes: number;
  maxAttachments: number;
}

/** Summary fields are cut at this many characters (docs/decisions.md "Caps"): lists stay small. */
export const SUMMARY_MAX_CHARS = 1000;
export const MAX_HEADER_VALUE = 64 * 1024;
export const MAX_FALLBACK_BODY = 1024 * 1024;
export const MAX_FALLBACK_HEAD = 1024 * 1024;
// C0 controls (but tab), DEL, C1 controls, bidi overrides/isolates, zero-width and BOM: never in a filename
const UNSAFE_FILENAME_CHARS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

export const stripNul = (s: string | undefined | null): string | null => (s == null ? null : s.replace(/\u0000/g, ''));
export const capSummary = (s: string) => (s.length > SUMMARY_MAX_CHARS ? `${s.slice(0, SUMMARY_MAX_CHARS - 1)}…` : s);
export const oneLine = (s: string) => s.replace(/\r?\n[ \t]*/g, ' ').replace(/[\r\n]/g, ' ').replace(/\u0000/g, '');

/** The whole parse of a message (nesting up to 256 levels; attachments as bytes). Throws when it cannot. */
export const parseMime = (raw: Uint8Array): Promise<PmEmail> => PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 });
/** The parse of a header block alone (postal-mime's default nesting). */
export const parseHead = (head: Uint8Array): Promise<PmEmail> => PostalMime.parse(head, { attachmentEncoding: 'arraybuffer' });

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
export const normalizeContentType = (t: string | null | undefined) => {
  const v = (t ?? '').trim().toLowerCase();
  return CT_RE.test(v) ? v : 'application/octet-stream';
};

export function toBytes(c: PmAttachment['content']): Uint8Array {
  if (typeof c === 'string') return new TextEncoder().encode(c);
  return c instanceof Uint8Array ? c : new Uint8Array(c);
}

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

/** Splits the header block off a raw message (for the fallback parse). */
export function headerBlock(raw: Uint8Array): { head: Uint8Array; body: Uint8Array } {
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

