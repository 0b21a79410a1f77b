// Response headers of the web pages and of the isolated email frame (docs/web.md "Isolation"). Two
// policies: the pages run only our own script; the frame runs nothing and loads nothing remote.
import type { FastifyReply } from 'fastify';
import type { Limits } from '../config.ts';

/** The pages: our script and stylesheet only, API calls to our origin, frames only from our origin. */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The email frame. `sandbox` in the header makes the document an opaque origin with no script
 * even when opened outside the iframe; `default-src 'none'` blocks every fetch (fonts, styles,
 * frames, media, prefetch); images come only from our cid route and data: URLs, plus http(s)
 * once the reader asks for remote images.
 */
export function frameCsp(remoteImages: boolean): string {
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `img-src 'self' data:${remoteImages ? ' http: https:' : ''}`,
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
    'sandbox allow-popups allow-popups-to-escape-sandbox',
  ].join('; ');
}

export function pageHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', PAGE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin')
    .header('permissions-policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()');
}

export function frameHeaders(reply: FastifyReply, remoteImages: boolean): FastifyReply {
  return reply
    .header('content-security-policy', frameCsp(remoteImages))
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-dns-prefetch-control', 'off')
    .header('x-robots-tag', 'noindex, nofollow, noarchive')
    .header('cross-origin-resource-policy', 'same-origin')
    .header('cache-control', 'private, no-store');
}

/**
 * The web routes outside /api (pages, event streams, frames, inline images) count in their own
 * per-IP bucket, so a person reading mail never spends the API quota of the scripts on the same IP.
 */
export const WEB_LIMITS: Limits = { perMinute: 300, perDay: 20_000 };

/** Event streams held at once per IP bucket, and in the whole process. */
export const STREAMS_PER_IP = 20;
export const STREAMS_TOTAL = 5_000;
