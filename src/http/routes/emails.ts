// /api/v1/emails/…: one email, its deletion, its attachments and its raw source.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { Core } from '../../services/core.ts';
import * as emails from '../../services/emails.ts';
import { readerOf } from '../../services/views.ts';
import { contentDisposition } from '../download.ts';
import { AttachmentSchema, EmailFullSchema, apiEmailFace, toWireAttachment } from '../schemas/wire.ts';
import { IdParams, NoContent, SECURITY, data, download, errors } from './shared.ts';

const AttachmentParams = Type.Object({ id: Type.String({ description: 'Email id' }), attachment_id: Type.String({ description: 'Attachment id' }) });

const EmailBody = data(Type.Ref(EmailFullSchema), 'The email');

export const emailRoutes: FastifyPluginAsyncTypebox<{ core: Core }> = async (app, { core }) => {
  let face: emails.EmailFace | null = null; // made at the first response (the app's serializer of EmailBody)
  app.get('/api/v1/emails/:id', {
    schema: {
      operationId: 'getEmail', tags: ['emails'], summary: 'One email with bodies and attachment metadata. 404 once expired.', security: SECURITY, params: IdParams,
      response: { 200: EmailBody, ...errors('unauthorized', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, (request, reply) => {
    face ??= apiEmailFace(reply.compileSerializationSchema(EmailBody) as (body: { data: unknown }) => string, core);
    // the 200 body as JSON bytes, exactly what the response schema serializes, sent as they are (kept
    // by the read model once final: services/answers.ts)
    reply.type('application/json; charset=utf-8');
    return emails.emailAnswer(core, request.params.id, face, readerOf(request.ip)) as unknown as Promise<Static<typeof EmailBody>>;
  });

  app.delete('/api/v1/emails/:id', {
    schema: {
      operationId: 'deleteEmail', tags: ['emails'], summary: 'Delete one email ahead of its TTL. Irreversible.', security: SECURITY, params: IdParams,
      response: { 204: NoContent, ...errors('unauthorized', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    await emails.deleteEmail(core, request.params.id);
    return reply.code(204).send(null); // (a 204 carries no body)
  });

  app.get('/api/v1/emails/:id/attachments', {
    schema: {
      operationId: 'listAttachments', tags: ['emails'], summary: 'Attachment metadata of one email (the same list is inlined in the email).', security: SECURITY, params: IdParams,
      response: { 200: Type.Object({ data: Type.Array(Type.Ref(AttachmentSchema)), meta: Type.Object({ email_id: Type.String(), count: Type.Integer() }) }, { description: 'Attachments' }), ...errors('unauthorized', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request) => {
    const list = await emails.listAttachments(core, request.params.id, readerOf(request.ip));
    const id = request.params.id.toLowerCase();
    return { data: list.map((a) => toWireAttachment(core, id, a)), meta: { email_id: id, count: list.length } };
  });

  app.get('/api/v1/emails/:id/attachments/:attachment_id', {
    schema: {
      operationId: 'downloadAttachment', tags: ['emails'], security: SECURITY, params: AttachmentParams,
      summary: 'Raw attachment bytes, always as a download (Content-Disposition: attachment, CSP sandbox, nosniff).',
      response: {
        // the media type is the attachment's own (application/pdf, image/png, …): any
        200: { description: 'The bytes, with the stored Content-Type (the attachment\'s own media type)', content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
        ...errors('unauthorized', 'not_found', 'rate_limited', 'quota_exceeded'),
      },
    },
  }, async (request, reply) => {
    const att = await emails.getAttachment(core, request.params.id, request.params.attachment_id, readerOf(request.ip));
    return download(reply, att.meta.contentType, att.meta.sizeBytes, contentDisposition(att.meta.filename), att.chunks);
  });

  app.get('/api/v1/emails/:id/raw', {
    schema: {
      operationId: 'getRawEmail', tags: ['emails'], security: SECURITY, params: IdParams,
      summary: 'The message as received (an .eml file), always as a download (Content-Disposition: attachment, CSP sandbox, nosniff). Parts over 5 MB are cut out of the stored copy.',
      response: {
        200: { description: 'The message bytes', content: { 'message/rfc822': { schema: { type: 'string', format: 'binary' } } } },
        ...errors('unauthorized', 'not_found', 'rate_limited', 'quota_exceeded'),
      },
    },
  }, async (request, reply) => {
    const { id, raw } = await emails.getRaw(core, request.params.id);
    return download(reply, 'message/rfc822', raw.sizeBytes, `attachment; filename="${id}.eml"`, raw.chunks);
  });
};
