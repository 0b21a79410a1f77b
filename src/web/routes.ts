// The web pages (docs/web.md): `/`, `/inbox/<address>`, `/inbox/<address>/<id>`, the isolated
// email frame `/web/frames/<id>` with its inline images, and the static scripts and stylesheet. The
// pages' own actions and live feed are /api/v1 requests of the "web" caller kind
// (http/plugins/web-caller.ts). Same process, no build step: the assets are read at start.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, describeError } from '../domain/errors.ts';
import { HTTP_WORDING } from '../http/plugins/errors.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import { getAttachment, getEmail, resolveInbox } from '../services/emails.ts';
import { readerOf } from '../services/views.ts';
import { loadAssets } from './assets.ts';
import { INLINE_IMAGE_TYPES, frameDocument } from './frame.ts';
import { emailPage, emailPath, homePage, inboxPage, inboxPath, messagePage } from './pages.ts';
import { WEB_LIMITS, frameHeaders, imagePathOf, pageHeaders } from './security.ts';

type Params = { address?: string; id?: string; attachment_id?: string; file?: string };

/** The web pages as a mount for buildApp (assemble.ts mounts it). */
export function registerWeb(app: FastifyInstance, core: Core): void {
  const { urls, byPath } = loadAssets();

  // Inboxes are public to anyone with the address, never to search engines: every page but `/` is noindex.
  const html = (reply: FastifyReply, status: number, body: string, imagePath = '') => {
    if (reply.request.url !== '/') reply.header('x-robots-tag', 'noindex, nofollow, noarchive');
    return pageHeaders(reply, imagePath).code(status).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(body);
  };

  /** Counts a web request in the IP's web bucket; answers 429 itself and returns false when over. */
  const admit = async (request: FastifyRequest, reply: FastifyReply, kind: 'page' | 'other'): Promise<boolean> => {
    const r = await core.limiter.hit(`web:${ipBucket(request.ip)}`, WEB_LIMITS, core.clock.now());
    if (r.allowed) return true;
    reply.header('retry-after', String(r.retryAfterSeconds));
    if (kind === 'page') html(reply, 429, messagePage(urls, 'Slow down', `Too many page loads from your network; retry in ${r.retryAfterSeconds} s.`));
    else reply.code(429).type('text/plain; charset=utf-8').send(`Too many requests; retry in ${r.retryAfterSeconds} s`);
    return false;
  };

  /** An AppError from a service as a page (not_found, invalid_request); anything else propagates. */
  const errorPage = (reply: FastifyReply, err: unknown, link?: { href: string; label: string }) => {
    if (!(err instanceof AppError) || (err.type !== 'not_found' && err.type !== 'invalid_request')) throw err;
    const title = err.type === 'not_found' ? 'Not found' : 'Not a valid address';
    return html(reply, err.status, messagePage(urls, title, describeError(err, HTTP_WORDING), link));
  };

  const hide = { schema: { hide: true } };

  app.get('/', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'page'))) return reply;
    return html(reply, 200, homePage(urls, core.domains.active(), core.config.emailTtlSeconds));
  });

  // The home page's form without script: a name or an address → its inbox.
  app.get<{ Querystring: { address?: string } }>('/open', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'page'))) return reply;
    let raw = String(request.query.address ?? '').trim();
    if (raw && !raw.includes('@')) raw = `${raw}@${core.domains.defaultDomain}`;
    try {
      const { address } = resolveInbox(core, raw);
      return reply.code(303).header('location', inboxPath(address)).send();
    } catch (err) {
      return errorPage(reply, err);
    }
  });

  app.get<{ Params: Params }>('/inbox/:address', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'page'))) return reply;
    try {
      const { address } = resolveInbox(core, request.params.address ?? '');
      return html(reply, 200, inboxPage(urls, address, core.config.emailTtlSeconds, core.mailAccess?.()));
    } catch (err) {
      return errorPage(reply, err);
    }
  });

  app.get<{ Params: Params }>('/inbox/:address/:id', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'page'))) return reply;
    let inbox: string | undefined;
    try {
      inbox = resolveInbox(core, request.params.address ?? '').address;
      const email = await getEmail(core, request.params.id ?? '', readerOf(request.ip));
      // one address per email: a path naming another inbox points at the email's own
      if (email.address !== inbox || request.params.id !== email.id) return reply.code(301).header('location', emailPath(email.address, email.id)).send();
      return html(reply, 200, emailPage(urls, email), imagePathOf(email.id));
    } catch (err) {
      return errorPage(reply, err, inbox ? { href: inboxPath(inbox), label: `Back to ${inbox}` } : undefined);
    }
  });

  app.get<{ Params: Params; Querystring: { images?: string } }>('/web/frames/:id', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'other'))) return reply;
    const remote = request.query.images === '1';
    try {
      const email = await getEmail(core, request.params.id ?? '', readerOf(request.ip));
      return frameHeaders(reply, remote, email.id).type('text/html; charset=utf-8').send(frameDocument(email, remote));
    } catch (err) {
      if (!(err instanceof AppError) || err.type !== 'not_found') throw err;
      return frameHeaders(reply, false).code(404).type('text/plain; charset=utf-8').send('This email is gone.');
    }
  });

  // Inline (cid:) images of the frame: raster images only, never SVG or HTML, never sniffed.
  app.get<{ Params: Params }>('/web/frames/:id/cid/:attachment_id', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'other'))) return reply;
    const gone = () => frameHeaders(reply, false).code(404).type('text/plain; charset=utf-8').send('No such inline image');
    let att;
    try {
      att = await getAttachment(core, request.params.id ?? '', request.params.attachment_id ?? '', readerOf(request.ip));
    } catch (err) {
      if (err instanceof AppError && err.type === 'not_found') return gone();
      throw err;
    }
    if (!INLINE_IMAGE_TYPES.has(att.meta.contentType)) return gone();
    const chunks: Uint8Array[] = [];
    for await (const c of att.chunks) chunks.push(c);
    return frameHeaders(reply, false)
      .header('content-security-policy', "default-src 'none'; sandbox")
      .header('cross-origin-resource-policy', 'cross-origin') // an email's own inline part, public with its email: any embedder may show it
      .header('cache-control', 'private, max-age=3600')
      .type(att.meta.contentType)
      .send(Buffer.concat(chunks));
  });

  app.get<{ Params: Params }>('/web/assets/:file', hide, async (request, reply) => {
    const asset = byPath.get(`/web/assets/${request.params.file ?? ''}`);
    if (!asset) return reply.code(404).type('text/plain; charset=utf-8').send('No such asset');
    return reply
      .type(asset.type)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .header('cross-origin-resource-policy', 'same-origin')
      .send(asset.body);
  });
}
