// GET /api/v1/inboxes/{address}/previews?ids=…: what a list shows beside each row, for up to 50
// emails at once: a one-line preview, the best code, the count of attachments not kept. The inbox
// page asks for it as rows arrive; views are derived once per message (in a worker) and kept, so
// this costs a read after the first. Registered by inboxes.ts.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import { AppError } from '../../domain/errors.ts';
import type { Core } from '../../services/core.ts';
import { resolveInbox, rowAndViews } from '../../services/emails.ts';
import { readerOf } from '../../services/views.ts';
import { AddressParams, SECURITY, errors } from './shared.ts';

/** Ids asked for at once. */
export const PREVIEWS_MAX = 50;
/** A preview's length in characters. */
export const PREVIEW_CHARS = 140;

const PreviewsQuery = Type.Object({
  ids: Type.String({ maxLength: PREVIEWS_MAX * 37, description: `Up to ${PREVIEWS_MAX} email ids of this inbox, comma-separated (more are ignored)` }),
});
const Preview = Type.Object({
  id: Type.String(),
  preview: Type.String({ description: `The first words of the text body (or of the HTML as text) on one line, at most ${PREVIEW_CHARS} characters` }),
  code: Type.Union([Type.String(), Type.Null()], { description: 'The best verification code found, or null' }),
  attachments_dropped: Type.Integer({ description: 'Attachments not kept (over 5 MB, or past the 100th)' }),
});

/** The first words of a body on one line, at most PREVIEW_CHARS characters. */
function previewOf(text: string): string {
  const line = text.slice(0, 2000).replace(/\s+/g, ' ').trim();
  return line.length > PREVIEW_CHARS ? `${line.slice(0, PREVIEW_CHARS - 1)}…` : line;
}

type App = Parameters<FastifyPluginAsyncTypebox<{ core: Core }>>[0];

export function registerPreviewsRoute(app: App, core: Core): void {
  app.get('/api/v1/inboxes/:address/previews', {
    schema: {
      operationId: 'previewEmails', tags: ['emails'], security: SECURITY, params: AddressParams, querystring: PreviewsQuery,
      summary: `Row previews for up to ${PREVIEWS_MAX} emails of one inbox at once: a one-line preview, the best code, the attachments not kept. Ids that are not this inbox's, or gone, are left out. Additive.`,
      response: {
        200: Type.Object({ data: Type.Array(Preview), meta: Type.Object({ address: Type.String(), count: Type.Integer() }) }, { description: 'Previews, in the order asked' }),
        ...errors('invalid_request', 'unauthorized', 'not_found', 'rate_limited', 'quota_exceeded'),
      },
    },
  }, async (request) => {
    const { address } = resolveInbox(core, request.params.address);
    const ids = request.query.ids.split(',').filter(Boolean).slice(0, PREVIEWS_MAX);
    const rows = readerOf(request.ip, 'list'); // previews wait behind anyone opening an email
    const found = await Promise.all(ids.map(async (id): Promise<Static<typeof Preview> | null> => {
      try {
        // the row and its views only: a preview shows no verdicts
        const { row, views: v } = await rowAndViews(core, id, rows);
        if (row.address !== address) return null;
        return { id: row.id, preview: previewOf(v.textBody ?? v.agentBody.body), code: v.codes[0]?.value ?? null, attachments_dropped: v.attachmentsDropped };
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        return null; // gone meanwhile (or not an id): no preview
      }
    }));
    const data = found.filter((p) => p !== null);
    return { data, meta: { address, count: data.length } };
  });
}
