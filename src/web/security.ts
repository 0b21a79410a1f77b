// Response headers of the web pages and of the isolated email frame (docs/web.md "Isolation"). Two
// policies: the pages run only our own script; the frame runs nothing and loads nothing remote.
import type { FastifyReply } from 'fastify';

/**
 * The pages: script and stylesheet only from our asset path (never from the rest of our origin,
 * where attachments are served: a future injection could not load one as script), API calls to our
 * origin, frames only from our frame path. `origin` is the one the browser used (scheme and Host).
 * Images: `data:` (the icon) and, on an email's page, that email's own image route (`imagePath`,
 * the attachment thumbnails: raster only, nosniff, sandboxed), never the rest of our origin.
 */
export function pageCsp(origin: string, imagePath = ''): string {
  return [
    "default-src 'none'",
    `script-src ${origin}/web/assets/`,
    `style-src ${origin}/web/assets/`,
    `img-src ${imagePath ? `${origin}${imagePath} ` : ''}data:`,
    "connect-src 'self'",
    `frame-src ${origin}/web/frames/`,
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The email frame. `sandbox` in the header keeps the document scriptless even when opened outside
 * the iframe. It is NOT an opaque origin: `allow-same-origin` keeps our origin so that the page's
 * script can read the frame's size (docs/web.md "What the frame's origin can reach" says why that is
 * safe: nothing in the frame can run, and every load it may start is listed below);
 * `default-src 'none'` blocks every fetch (fonts, styles,
 * frames, media, prefetch); images come only from this email's own cid route and data: URLs (never
 * from the rest of our origin: `<img src="/api/v1/…">` would spend the reader's quota), plus http(s)
 * once the reader asks for remote images (the API then refuses image loads itself: Sec-Fetch-Dest).
 */
export function frameCsp(remoteImages: boolean, cidPath = ''): string {
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `img-src ${cidPath ? `${cidPath} ` : ''}data:${remoteImages ? ' http: https:' : ''}`,
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
    // allow-same-origin lets the page's own script read the frame's height and fit its width (there
    // is no script in the frame to ask: no allow-scripts here nor on the iframe, script-src unset)
    'sandbox allow-same-origin allow-popups allow-popups-to-escape-sandbox',
  ].join('; ');
}

/** The origin the browser used for this request. */
export const originOf = (reply: FastifyReply) => `${reply.request.protocol}://${reply.request.host}`;

/** `imagePath`: the one path the page may show images from besides data: (pageCsp). */
export function pageHeaders(reply: FastifyReply, imagePath = ''): FastifyReply {
  return reply
    .header('content-security-policy', pageCsp(originOf(reply), imagePath))
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin')
    .header('permissions-policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()');
}

/** The email's own image route: its inline (cid:) images in the frame, its image attachments' thumbnails on its page. */
export const imagePathOf = (emailId: string) => `/web/frames/${encodeURIComponent(emailId)}/cid/`;

export function frameHeaders(reply: FastifyReply, remoteImages: boolean, emailId = ''): FastifyReply {
  const cidPath = emailId ? `${originOf(reply)}${imagePathOf(emailId)}` : '';
  return reply
    .header('content-security-policy', frameCsp(remoteImages, cidPath))
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-dns-prefetch-control', 'off')
    .header('x-robots-tag', 'noindex, nofollow, noarchive')
    .header('cross-origin-resource-policy', 'same-origin')
    .header('cache-control', 'private, no-store');
}

// The web bucket and the page streams' caps belong to the web caller kind, which the API's own
// routes count too (the page's actions and live feed are /api/v1 requests).
export { STREAM_CAPS, STREAMS_PER_IP, STREAMS_TOTAL, WEB_LIMITS } from '../http/plugins/web-caller.ts';
