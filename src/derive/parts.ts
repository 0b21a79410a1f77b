// The parts of a message as a reader gets them, without a parser (safe filenames, content types,
// bytes): light enough for the registry (registry.ts) to import wherever it is loaded.
import type { Attachment as PmAttachment } from 'postal-mime';

/** Text read from a body as received, or from HTML as words (its fallback text body): at most this much. */
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
