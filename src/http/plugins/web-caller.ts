// The "web" caller kind (docs/security.md "The web caller"): the inbox pages' own requests to
// /api/v1, counted in the IP's web bucket (shared with the pages, frames and inline images) instead
// of the API quota, so a person who only browses is never told to mint a key. It is recognised, never
// claimed with a credential, and covers exactly what the page does, nothing more: a browser's
// same-origin request (`Sec-Fetch-Site: same-origin`, which no other site can make the browser send)
// without a key, to one of the page's own routes with only the parameters the page sends. Anything
// else is an ordinary anonymous or key caller.
import type { FastifyRequest } from 'fastify';
import type { Limits } from '../../config.ts';

/** The IP's web bucket: page loads, frames, inline images and the page's API requests together. */
export const WEB_LIMITS: Limits = Object.freeze({ perMinute: 300, perDay: 20_000 });

/** Page event streams held at once per client (IPv4 address or IPv6 /64), per IPv6 /56 and /48, and in the whole process. */
export const STREAM_CAPS = Object.freeze({ perAddress: 10, per56: 20, per48: 40 });
export const STREAMS_PER_IP = STREAM_CAPS.perAddress;
export const STREAMS_TOTAL = 5_000;
/** A page's event stream ends after this long; the page lists the inbox again and reconnects. */
export const PAGE_STREAM_LIFETIME_MS = 5 * 60_000;

/**
 * What the page does, by route: the query parameters it may send (the page lists at most 100, searches
 * body text, resumes a stream) and whether a body is allowed (never: the page creates random
 * addresses only). GET covers HEAD.
 */
const PAGE_ROUTES: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['POST /api/v1/inboxes', new Set<string>()],
  ['GET /api/v1/inboxes/:address/emails', new Set(['limit', 'text'])],
  ['DELETE /api/v1/inboxes/:address/emails', new Set<string>()],
  ['GET /api/v1/inboxes/:address/events', new Set(['since'])],
  ['GET /api/v1/inboxes/:address/previews', new Set(['ids'])],
  ['DELETE /api/v1/emails/:id', new Set<string>()],
  ['GET /api/v1/emails/:id/raw', new Set<string>()],
  ['GET /api/v1/emails/:id/attachments/:attachment_id', new Set<string>()],
]);

/** Whether a keyless request is the page's own (checked before it is counted: onRequest). */
export function isPageRequest(request: FastifyRequest): boolean {
  if (request.headers['sec-fetch-site'] !== 'same-origin') return false;
  const route = request.routeOptions.url;
  if (route === undefined) return false;
  const allowed = PAGE_ROUTES.get(`${request.method === 'HEAD' ? 'GET' : request.method} ${route}`);
  if (!allowed) return false;
  // no body: the page's POST and DELETE send none (a body would choose an address: not the page's)
  const length = request.headers['content-length'];
  if ((length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined) return false;
  return Object.keys(request.query as object).every((k) => allowed.has(k));
}
