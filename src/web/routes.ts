// The web pages (docs/web.md): `/`, `/inbox/<address>`, `/inbox/<address>/<id>`, the live
// feed `/web/events/<address>`, the isolated email frame `/web/frames/<id>` with its inline images,
// and the static script and stylesheet. Same process, no build step: the assets are read at start.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import { AppError, describeError } from '../domain/errors.ts';
import { HTTP_WORDING } from '../http/plugins/errors.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import { deleteEmail, getAttachment, getEmail, getRaw, listEmails, purgeInbox, resolveInbox } from '../services/emails.ts';
import { createInbox } from '../services/inboxes.ts';
import { readerOf } from '../services/views.ts';
import { contentDisposition } from '../http/download.ts';
import { download } from '../http/routes/shared.ts';
import { toWireSummary } from '../http/schemas/wire.ts';
import { createStreamHub } from './events.ts';
import { INLINE_IMAGE_TYPES, frameDocument } from './frame.ts';
import { emailPage, emailPath, homePage, inboxPage, inboxPath, messagePage, type Assets } from './pages.ts';
import { WEB_LIMITS, frameHeaders, pageHeaders } from './security.ts';

interface Asset {
  path: string;
  type: string;
  body: Buffer;
}

function loadAssets(): { urls: Assets; byPath: Map<string, Asset> } {
  const byPath = new Map<string, Asset>();
  const load = (file: string, type: string) => {
    const body = readFileSync(new URL(`./assets/${file}`, import.meta.url));
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 10);
    const [name, ext] = file.split('.');
    const path = `/web/assets/${name}.${hash}.${ext}`;
    byPath.set(path, { path, type, body });
    return path;
  };
  return { urls: { js: load('app.js', 'text/javascript; charset=utf-8'), css: load('app.css', 'text/css; charset=utf-8') }, byPath };
}

type Params = { address?: string; id?: string; attachment_id?: string; file?: string };

export interface WebOptions {
  /** How long one event stream lives before the browser reconnects (default 5 minutes). */
  streamLifetimeMs?: number;
}

/** The web pages as a mount for buildApp (assemble.ts mounts registerWeb, the defaults). */
export function createWebMount(options: WebOptions = {}): (app: FastifyInstance, core: Core) => void {
  return (app, core) => mountWeb(app, core, options);
}

export const registerWeb = createWebMount();

function mountWeb(app: FastifyInstance, core: Core, options: WebOptions): void {
  const { urls, byPath } = loadAssets();
  const hub = createStreamHub({ lifetimeMs: options.streamLifetimeMs });
  app.addHook('preClose', async () => hub.closeAll());

  // Inboxes are public to anyone with the address, never to search engines: every page but `/` is noindex.
  const html = (reply: FastifyReply, status: number, body: string) => {
    if (reply.request.url !== '/') reply.header('x-robots-tag', 'noindex, nofollow, noarchive');
    return pageHeaders(reply).code(status).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(body);
  };

  /** Counts a web request in the IP's web bucket; answers 429 itself and returns false when over. */
  const admit = async (request: FastifyRequest, reply: FastifyReply, kind: 'page' | 'action' | 'other'): Promise<boolean> => {
    const r = await core.limiter.hit(`web:${ipBucket(request.ip)}`, WEB_LIMITS, core.clock.now());
    if (r.allowed) return true;
    reply.header('retry-after', String(r.retryAfterSeconds));
    if (kind === 'page') html(reply, 429, messagePage(urls, 'Slow down', `Too many page loads from your network; retry in ${r.retryAfterSeconds} s.`));
    else if (kind === 'action') reply.code(429).header('cache-control', 'no-store').send({ error: { type: 'rate_limited', message: `Too many actions from your network for now; try again in ${r.retryAfterSeconds} s.` } });
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
      return html(reply, 200, inboxPage(urls, address, core.config.emailTtlSeconds));
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
      return html(reply, 200, emailPage(urls, email));
    } catch (err) {
      return errorPage(reply, err, inbox ? { href: inboxPath(inbox), label: `Back to ${inbox}` } : undefined);
    }
  });

  // The page's own actions (create, list, delete, empty, source, row details, body search): the same
  // services as the API, counted in the IP's web bucket (WEB_LIMITS), never in the API quota, so a
  // person who only browses is never told to mint a key. JSON errors in the API's envelope shape.
  /**
   * A page action's handler: refused cross-site (no other site's form may act) and when an email could
   * have made it (an image), counted in the web bucket, and a service error answered as JSON.
   */
  const action = <G extends RouteGenericInterface>(handler: (request: FastifyRequest<G>, reply: FastifyReply) => Promise<unknown>) =>
    async (request: FastifyRequest<G>, reply: FastifyReply): Promise<unknown> => {
      const dest = request.headers['sec-fetch-dest'];
      if (dest !== undefined && dest !== 'empty' && dest !== 'document') {
        return reply.code(403).send({ error: { type: 'invalid_request', message: 'Page actions are fetched by the page itself' } });
      }
      const site = request.headers['sec-fetch-site'];
      if (request.method !== 'GET' && site !== undefined && site !== 'same-origin' && site !== 'none') {
        return reply.code(403).send({ error: { type: 'invalid_request', message: 'Page actions are taken from the page itself' } });
      }
      if (!(await admit(request, reply, 'action'))) return reply;
      try {
        return await handler(request, reply);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter));
        return reply.code(err.status).header('cache-control', 'no-store').send({ error: { type: err.type, message: describeError(err, HTTP_WORDING) } });
      }
    };

  app.post('/web/inboxes', hide, action(async (request, reply) => {
    const a = await createInbox(core, { randomLength: 10 });
    return reply.code(201).header('cache-control', 'no-store').send({ address: a.address });
  }));

  app.get<{ Params: Params }>('/web/inboxes/:address/emails', hide, action(async (request, reply) => {
    const out = await listEmails(core, { address: request.params.address ?? '', limit: 100 });
    return reply.header('cache-control', 'no-store').send({ address: out.address, emails: out.emails.map(toWireSummary) });
  }));

  app.delete<{ Params: Params }>('/web/inboxes/:address/emails', hide, action(async (request, reply) => {
    return reply.header('cache-control', 'no-store').send(await purgeInbox(core, request.params.address ?? ''));
  }));

  app.delete<{ Params: Params }>('/web/emails/:id', hide, action(async (request, reply) => {
    await deleteEmail(core, request.params.id ?? '');
    return reply.code(204).send();
  }));

  // The source view and the .eml download: the bytes as received, never rendered.
  app.get<{ Params: Params }>('/web/emails/:id/raw', hide, action(async (request, reply) => {
    const { id, raw } = await getRaw(core, request.params.id ?? '');
    return download(reply, 'message/rfc822', raw.sizeBytes, `attachment; filename="${id}.eml"`, raw.chunks);
  }));

  // Attachment downloads from the page: the stored bytes, never rendered.
  app.get<{ Params: Params }>('/web/emails/:id/attachments/:attachment_id', hide, action(async (request, reply) => {
    const att = await getAttachment(core, request.params.id ?? '', request.params.attachment_id ?? '', readerOf(request.ip));
    return download(reply, att.meta.contentType, att.meta.sizeBytes, contentDisposition(att.meta.filename), att.chunks);
  }));

  // What the list shows beside each row: a one-line preview, the best code, dropped attachments.
  // Views are derived once per message (in a worker) and kept, so this costs a read after the first.
  app.get<{ Params: Params; Querystring: { ids?: string } }>('/web/inboxes/:address/details', hide, action(async (request, reply) => {
    const { address } = resolveInbox(core, request.params.address ?? '');
    const ids = String(request.query.ids ?? '').split(',').filter(Boolean).slice(0, ROW_DETAILS_MAX);
    const rows = readerOf(request.ip, 'list'); // previews wait behind anyone opening an email
    const details: Record<string, { preview: string; code: string | null; attachments_dropped: number }> = {};
    await Promise.all(ids.map(async (id) => {
      try {
        const e = await getEmail(core, id, rows);
        if (e.address !== address) return;
        details[e.id] = { preview: previewOf(e.textBody ?? e.agentBody.body), code: e.codes[0]?.value ?? null, attachments_dropped: e.attachmentsDropped };
      } catch (err) {
        if (!(err instanceof AppError)) throw err; // gone meanwhile: no details
      }
    }));
    return reply.header('cache-control', 'no-store').send({ details });
  }));

  // Body-text search of the page (the API's `text` filter): the ids of the newest 100 that match.
  app.get<{ Params: Params; Querystring: { q?: string } }>('/web/inboxes/:address/search', hide, action(async (request, reply) => {
    const out = await listEmails(core, { address: request.params.address ?? '', limit: 100, text: String(request.query.q ?? '') });
    return reply.header('cache-control', 'no-store').send({ ids: out.emails.map((e) => e.id) });
  }));

  app.get<{ Params: Params }>('/web/events/:address', hide, async (request, reply) => {
    let address: string;
    try {
      address = resolveInbox(core, request.params.address ?? '').address;
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return reply.code(err.status).type('text/plain; charset=utf-8').send(describeError(err, HTTP_WORDING));
    }
    if (request.method === 'HEAD') return reply.type('text/event-stream').header('cache-control', 'no-store').send();
    if (!(await admit(request, reply, 'other'))) return reply;
    if (!hub.open(core, request, reply, address, request.ip)) {
      return reply.code(429).header('retry-after', '10').type('text/plain; charset=utf-8').send('Too many open inbox pages from your network');
    }
    return reply;
  });

  app.get<{ Params: Params; Querystring: { images?: string } }>('/web/frames/:id', hide, async (request, reply) => {
    if (!(await admit(request, reply, 'other'))) return reply;
    const remote = request.query.images === '1';
    try {
      const email = await getEmail(core, request.params.id ?? '', readerOf(request.ip));
      return frameHeaders(reply, remote, email.id).type('text/html; charset=utf-8').send(frameDocument(email));
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

/** Row details asked for at once. */
const ROW_DETAILS_MAX = 50;

/** The first words of a body on one line, at most 140 characters. */
function previewOf(text: string): string {
  const line = text.slice(0, 2000).replace(/\s+/g, ' ').trim();
  return line.length > 140 ? `${line.slice(0, 139)}…` : line;
}

