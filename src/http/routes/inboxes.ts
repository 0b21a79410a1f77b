// /api/v1/domains and /api/v1/inboxes/…: addresses, the list (with wait), latest, purge (the event stream: events.ts).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { Caller } from '../plugins/caller.ts';
import { AppError } from '../../domain/errors.ts';
import { isUuid } from '../../domain/ids.ts';
import { FILTER_MAX_CHARS } from '../../domain/search.ts';
import type { Core } from '../../services/core.ts';
import * as emails from '../../services/emails.ts';
import { createInbox } from '../../services/inboxes.ts';
import { readerOf } from '../../services/views.ts';
import { withWaitSlot } from '../../services/wait.ts';
import { DomainSchema, EmailFullSchema, EmailSummarySchema, InboxSchema, ListMetaSchema, createSummaryJson, toWireEmail } from '../schemas/wire.ts';
import { registerEventsRoute } from './events.ts';
import { registerPreviewsRoute } from './previews.ts';
import { AddressParams, SECURITY, data, errors } from './shared.ts';

const ListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 25, description: 'Page size' }),
  since: Type.Optional(Type.String({ description: 'An email id: only newer emails, oldest first' })),
  before: Type.Optional(Type.String({ description: 'An email id: only older emails, newest first (pages backwards)' })),
  wait: Type.Integer({ minimum: 0, maximum: 30, default: 0, description: 'Seconds to hold when the result would be empty. Needs an API key.' }),
  from: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose decoded From contains this text (case-insensitive). With wait, the request returns only when a matching email arrives. Additive.' })),
  subject: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose decoded Subject contains this text (case-insensitive). Additive.' })),
  text: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose body text (the plain part, or the HTML part as text; its first 32,768 characters) contains this, case-insensitive, any run of white space matching any other. Reads the search texts of at most the 200 nearest emails per request. Additive.' })),
});
const LatestQuery = Type.Object({
  since: Type.Optional(Type.String({ description: 'An email id: only newer emails. Any UUIDv7 works, so one made from the current time means "only mail from now on".' })),
  wait: Type.Integer({ minimum: 0, maximum: 30, default: 0, description: 'Seconds to hold until a matching email arrives. Needs an API key.' }),
  from: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose decoded From contains this text (case-insensitive)' })),
  subject: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose decoded Subject contains this text (case-insensitive)' })),
  text: Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: 'Only emails whose body text contains this (case-insensitive, white space as one space); reads the search texts of at most the 200 nearest emails per request' })),
  // one per view of the registry that `latest` filters on (derive/registry.ts wire.filter)
  ...Object.fromEntries(emails.VIEW_FILTERS.map((f) => [f.field, Type.Optional(Type.String({ maxLength: FILTER_MAX_CHARS, description: `${f.description}. Reads the views of at most the ${emails.VIEW_SCAN_MAX} nearest emails that match the other filters. Additive.` }))])),
});
const InboxBody = Type.Optional(
  Type.Object(
    {
      domain: Type.Optional(Type.String({ maxLength: 253, description: 'One of GET /api/v1/domains; default: the first' })),
      local_part: Type.Optional(Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$', description: 'Lowercased; random 10 characters of [a-z0-9] when omitted' })),
    },
    { additionalProperties: false },
  ),
);


export const inboxRoutes: FastifyPluginAsyncTypebox<{ core: Core; pageStreamMs?: number }> = async (app, { core, pageStreamMs }) => {
  let listSerializers: ListSerializers | null = null; // compiled at the first list response
  const parse = emails.addressParser();

  app.get('/api/v1/domains', {
    schema: {
      operationId: 'listDomains', tags: ['inboxes'], summary: 'Domains that accept mail; use this list instead of hard-coding a domain.', security: SECURITY,
      response: { 200: Type.Object({ data: Type.Array(Type.Ref(DomainSchema)), meta: Type.Object({ count: Type.Integer() }) }, { description: 'Active domains, the default first' }), ...errors('unauthorized', 'rate_limited', 'quota_exceeded') },
    },
  }, async () => {
    const active = core.domains.active();
    return { data: active.map((domain) => ({ domain })), meta: { count: active.length } };
  });

  app.post('/api/v1/inboxes', {
    schema: {
      operationId: 'createInbox', tags: ['inboxes'], summary: 'Generate an inbox address that is empty now. Inboxes are implicit: any address at an active domain receives mail.', security: SECURITY,
      body: InboxBody,
      response: { 201: data(Type.Ref(InboxSchema), 'The address'), ...errors('invalid_request', 'unauthorized', 'address_in_use', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    const a = await createInbox(core, { domain: request.body?.domain, localPart: request.body?.local_part, randomLength: 10 });
    reply.code(201);
    return { data: { address: a.address, local_part: a.localPart, domain: a.domain, email_ttl_seconds: core.config.emailTtlSeconds } };
  });

  app.get('/api/v1/inboxes/:address/emails', {
    schema: {
      operationId: 'listEmails', tags: ['emails'], security: SECURITY,
      summary: 'List emails (no bodies). Newest first; with since, oldest first. wait holds the request until mail arrives (needs a key).',
      params: AddressParams, querystring: ListQuery,
      response: {
        200: ListResponse,
        ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded', 'too_many_waiters'),
      },
    },
  }, (request, reply) => {
    const q = request.query;
    const input = { address: request.params.address, limit: q.limit, since: q.since, before: q.before, waitSeconds: q.wait, from: q.from, subject: q.subject, text: q.text, reader: q.text ? readerOf(request.ip, 'list') : undefined }; // search texts made for a text filter take turns by client
    // without wait nothing is held: no slot, no abort signal, no listener on the socket
    const answer = (out: emails.ListOutput) => listJson(reply, (listSerializers ??= compileListSerializers(reply)), q, out);
    if (q.wait <= 0) {
      // a page at hand is sent at once (no promise, no turn of the event loop); else it is read
      const now = emails.listEmailsNow(core, input, parse);
      if (now) return void reply.send(answer(now));
      return emails.listEmails(core, input).then(answer);
    }
    return held(request.caller, reply, q.wait, () => emails.checkList(core, input, parse), async (checked, signal) => answer(await emails.listEmails(core, { ...input, signal }, checked)));
  });

  /**
   * A held request: needs a key, has its input checked (once: `check` is the service's own check,
   * passed on to `run`, so a bad input fails before taking a slot), takes one of its wait slots,
   * and is abandoned when the client goes.
   */
  async function held<C, T>(c: Caller, reply: FastifyReply, wait: number, check: () => C, run: (checked: C, signal: AbortSignal) => Promise<T>): Promise<T> {
    if (c.kind !== 'key' || !c.key) throw new AppError('key_required', 'wait needs an API key: create one with POST /api/v1/keys and send it as Authorization: Bearer <key> or X-API-Key');
    const checked = check();
    const refusal = `This key already holds ${c.concurrentWaits} waiting requests; let one finish first`;
    return withWaitSlot(core.limiter, core.clock, { bucket: c.bucket, max: c.concurrentWaits, refusal }, wait * 1000, async () => {
      const abort = new AbortController();
      const onClose = () => { if (!reply.raw.writableEnded) abort.abort(); };
      reply.raw.on('close', onClose);
      try {
        return await run(checked, abort.signal);
      } finally {
        reply.raw.off('close', onClose);
      }
    });
  }

  registerEventsRoute(app, core, pageStreamMs);
  registerPreviewsRoute(app, core);

  app.get('/api/v1/inboxes/:address/latest', {
    schema: {
      operationId: 'latestEmail', tags: ['emails'], security: SECURITY,
      summary: 'The newest email that matches (from, subject, since), in full with codes and links; with wait, held until one arrives. "Wait for the verification email and give me the code" in one request. Additive.',
      params: AddressParams, querystring: LatestQuery,
      response: {
        200: Type.Object({
          data: Type.Union([Type.Ref(EmailFullSchema), Type.Null()], { description: 'The newest matching email, or null when nothing matched (also when a wait ran out)' }),
          meta: Type.Object({ address: Type.String(), waited: Type.Boolean({ description: 'Whether the request was held' }) }),
        }, { description: 'The newest matching email or null' }),
        ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded', 'too_many_waiters'),
      },
    },
  }, async (request, reply) => {
    const q = request.query;
    const views = Object.fromEntries(emails.VIEW_FILTERS.map((f) => [f.name, (q as Record<string, unknown>)[f.field] as string | undefined]));
    const input = { address: request.params.address, since: q.since, from: q.from, subject: q.subject, text: q.text, views, waitSeconds: q.wait, reader: readerOf(request.ip) };
    const answer = (out: Awaited<ReturnType<typeof emails.latestEmail>>) =>
      ({ data: out.email && toWireEmail(core, out.email), meta: { address: out.address, waited: out.waited } });
    if (q.wait <= 0) return answer(await emails.latestEmail(core, input));
    return held(request.caller, reply, q.wait, () => emails.checkLatest(core, input), async (checked, signal) => answer(await emails.latestEmail(core, { ...input, signal }, checked)));
  });

  app.delete('/api/v1/inboxes/:address/emails', {
    schema: {
      operationId: 'purgeInbox', tags: ['emails'], summary: 'Delete every email in the inbox. Irreversible.', security: SECURITY, params: AddressParams,
      response: { 200: data(Type.Object({ address: Type.String(), deleted: Type.Integer({ description: 'Number of emails removed' }) }), 'Purged'), ...errors('invalid_request', 'unauthorized', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request) => ({ data: await emails.purgeInbox(core, request.params.address) }));
};

const SummaryRef = Type.Ref(EmailSummarySchema);
const ListMetaRef = Type.Ref(ListMetaSchema);
const ListResponse = Type.Object({ data: Type.Array(SummaryRef), meta: ListMetaRef }, { description: 'Emails; empty data when nothing matched (also when a wait ran out)' });
/** The list's 200 body as its schema types it (listJson hands Fastify its JSON bytes, sent as they are). */
type ListBody = Static<typeof ListResponse>;
type Summary = import('../../domain/summary.ts').EmailSummary;
interface ListSerializers {
  /** Each summary's JSON, kept per summary object (createSummaryJson). */
  summary: (e: Summary) => string;
  meta: (wire: unknown) => string;
  /** Bodies of pages answered lately, by page (see listJson). */
  pages: Map<string, { emails: Summary[]; waited: boolean; body: Buffer }>;
  /** The body of each page the read cache holds (a kept, frozen array), answered without waiting. */
  held: WeakMap<Summary[], Buffer>;
}
/** Pages whose bodies are kept (the newest answered; a page is a few KB). */
const PAGES_KEPT = 1024;
/** The app's fast-json-stringify serializers of EmailSummary and ListMeta (the shared schemas). */
const compileListSerializers = (reply: FastifyReply): ListSerializers => ({
  summary: createSummaryJson(reply.compileSerializationSchema(SummaryRef) as (wire: unknown) => string),
  meta: reply.compileSerializationSchema(ListMetaRef) as (wire: unknown) => string,
  pages: new Map(),
  held: new WeakMap(),
});

/**
 * The 200 body of GET .../emails (the summaries and the paging cursors) as JSON bytes: exactly what
 * the route's response schema would serialize, `{"data":[<summary>,…],"meta":<meta>}`, with each
 * summary and the meta written by the fast-json-stringify serializers of their own schemas, and each
 * email's summary serialized once (createSummaryJson) rather than on every poll of the same page.
 * The store hands out the same summary objects while a page stays cached (store/read-cache.ts), so
 * a page polled again is answered with the bytes of its last answer when it holds the very same
 * summaries (===) for the same query: a comparison per email instead of assembling and encoding.
 */
function listJson(reply: FastifyReply, { summary, meta, pages, held }: ListSerializers, q: Static<typeof ListQuery>, out: emails.ListOutput): ListBody {
  const items = out.emails;
  reply.type('application/json; charset=utf-8'); // what Fastify sets for a serialized object
  // a page the read cache holds is one kept array per query (address, cursor, limit: its key there),
  // so its body is known by the array alone
  const frozen = !out.waited && Object.isFrozen(items);
  const known = frozen ? held.get(items) : undefined;
  if (known) return known as unknown as ListBody;
  const page = `${out.address}\u0000${q.limit}\u0000${q.since ?? ''}\u0000${q.before ?? ''}`;
  const kept = pages.get(page);
  if (kept && kept.waited === out.waited && (kept.emails === items || (kept.emails.length === items.length && kept.emails.every((e, i) => e === items[i])))) {
    if (frozen) held.set(items, kept.body);
    return kept.body as unknown as ListBody;
  }
  const newestId = q.since ? items.at(-1)?.id : items[0]?.id;
  const oldestId = q.since ? items[0]?.id : items.at(-1)?.id;
  let data = '';
  for (let i = 0; i < items.length; i++) data += (i === 0 ? '' : ',') + summary(items[i]);
  const body = Buffer.from(`{"data":[${data}],"meta":${meta({
    address: out.address,
    count: items.length,
    next_since: newestId ?? q.since?.toLowerCase() ?? null,
    next_before: items.length === q.limit && oldestId ? oldestId : null,
    waited: out.waited,
  })}}`, 'utf8');
  pages.delete(page);
  if (pages.size >= PAGES_KEPT) pages.delete(pages.keys().next().value!);
  // (a page the read cache holds is kept frozen: the same array, compared by identity next time)
  pages.set(page, { emails: Object.isFrozen(items) ? items : items.slice(), waited: out.waited, body });
  if (frozen) held.set(items, body);
  // the one place where the reply's type (derived from the schema) is the bytes of that object
  return body as unknown as ListBody;
}
