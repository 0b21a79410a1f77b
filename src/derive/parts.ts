// The parts of a message as a reader gets them, without a parser (safe filenames, content types,
// bytes) and HTML as rough text in one linear pass: light enough for the registry (registry.ts) to
// import wherever it is loaded.
import type { Attachment as PmAttachment } from 'postal-mime';

/** Text read from a body as received, or from HTML without a parser: at most this much. */
export const MAX_FALLBACK_BODY = 1024 * 1024;

// C0 controls (but tab), DEL, C1 controls, bidi overrides/isolates, zero-width and BOM: never in a filename
const UNSAFE_FILENAME_CHARS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;


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

/**
 * The words of HTML without parsing it (tags and comments dropped, a few entities decoded, one
 * pass), where the reader's conversion (domain/html.ts's htmlToText) costs too much: the search
 * text at ingest (summary.ts, on the event loop before the 250), the codes found in an HTML part
 * whose text part is the body, and the text body of an HTML-only message whose HTML budget ran out
 * (its fallback). It is 15-50x faster than htmlToText (docs/decisions.md "One way each").
 */
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

