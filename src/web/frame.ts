// The document inside the email frame: the stored (already sanitized) HTML body in a neutral shell.
// The sanitizer is not the boundary (spec: "not a security boundary"); the frame's sandbox and CSP
// are (security.ts). Here we only point cid: images at our inline-image route and open links in a
// new tab.
import type { AttachmentMeta, EmailFull } from '../domain/message.ts';

/** Raster types an <img> may show from an attachment (never SVG or HTML). */
export const INLINE_IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/jpg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp']);

/**
 * The attachment a `cid:` reference names: by its Content-ID first (Gmail's `<ii_lx9k2f3a0>` differs
 * from the file name), then by file name, as senders name inline parts `<name>` or `<name>@<host>`
 * after the file (Outlook, Apple Mail, nodemailer's `cid` option with a file name). Unmatched
 * references stay blocked.
 */
export function attachmentForCid(cid: string, attachments: AttachmentMeta[]): AttachmentMeta | undefined {
  let ref = cid.trim().replace(/^<|>$/g, '');
  try {
    ref = decodeURIComponent(ref);
  } catch {
    // keep it as written
  }
  const lower = ref.toLowerCase();
  const beforeAt = lower.includes('@') ? lower.slice(0, lower.lastIndexOf('@')) : lower;
  const images = attachments.filter((a) => INLINE_IMAGE_TYPES.has(a.contentType));
  const byCid = images.find((a) => a.contentId !== null && a.contentId.toLowerCase() === lower);
  if (byCid) return byCid;
  return images.find((a) => a.filename.toLowerCase() === lower) ?? images.find((a) => a.filename.toLowerCase() === beforeAt) ?? images.find((a) => a.id.toLowerCase() === lower);
}

const BASE_STYLE = `:root{color-scheme:light}html{background:#fff}body{margin:0;padding:16px;color:#111;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;overflow-wrap:anywhere}img{max-width:100%;height:auto}table{max-width:100%}pre{white-space:pre-wrap}`;

/**
 * While remote images are blocked, an image from elsewhere would leave the box its width and height
 * ask for (a 600×200 hero: 200 px of nothing before the text): it shrinks to its alt text instead
 * (nothing when it has none, a tracking pixel). Only our own stylesheet's rule; the mail is unchanged.
 */
const BLOCKED_STYLE = `img[src^="http:" i],img[src^="https:" i],img[src^="//"]{width:auto!important;height:auto!important;min-height:0!important;aspect-ratio:auto!important;max-height:3em!important}`;

export function frameDocument(e: EmailFull, remoteImages = false): string {
  const html = (e.htmlBody ?? '').replace(/(\ssrc\s*=\s*")cid:([^"]*)"/gi, (_m, pre: string, cid: string) => {
    const unescaped = cid.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'");
    const att = attachmentForCid(unescaped, e.attachments);
    return att ? `${pre}/web/frames/${e.id}/cid/${encodeURIComponent(att.id)}"` : `${pre}about:blank"`;
  });
  return `<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="x-dns-prefetch-control" content="off"><meta name="referrer" content="no-referrer"><base target="_blank"><style>${BASE_STYLE}${remoteImages ? '' : BLOCKED_STYLE}</style></head><body>${html}</body></html>`;
}
