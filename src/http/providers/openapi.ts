// GET /providers/openapi.json: the provider emulations' own OpenAPI document, apart from /api/v1's
// contract (whose document never lists them). Each route's request is the provider's own (its
// public API reference is the schema: linked, not copied); the answers and errors are ephemail's.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../services/core.ts';
import { PROVIDER_OPENAPI_PATH, PROVIDER_PREFIXES } from './prefixes.ts';

const json = (schema: object, description: string) => ({ description, content: { 'application/json': { schema } } });
const xml = (description: string) => ({ description, content: { 'text/xml': { schema: { type: 'string' } } } });
const anyJson = (description: string) => ({ required: true, description, content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } } });
const retry = { 'retry-after': { description: 'On 429: seconds to wait', schema: { type: 'integer' } } };

function op(tag: string, operationId: string, summary: string, requestBody: object, ok: Record<string, object>, error: (status: string) => object) {
  return {
    tags: [tag],
    operationId,
    summary,
    requestBody,
    responses: {
      ...ok,
      ...Object.fromEntries(['400', '413', '422', '429'].filter((s) => !(s in ok)).map((s) => [s, { ...error(s), ...(s === '429' ? { headers: retry } : {}) }])),
    },
  };
}

export function providerDocument(baseUrl: string): object {
  const sgError = (s: string) => json({ type: 'object', properties: { errors: { type: 'array', items: { type: 'object', properties: { message: { type: 'string' }, field: { type: ['string', 'null'] }, help: { type: ['string', 'null'] } } } } } }, `SendGrid's error (${s})`);
  const rsError = (s: string) => json({ type: 'object', properties: { statusCode: { type: 'integer' }, name: { type: 'string' }, message: { type: 'string' } } }, `Resend's error (${s})`);
  const pmError = (s: string) => json({ type: 'object', properties: { ErrorCode: { type: 'integer' }, Message: { type: 'string' } } }, `Postmark's error (${s})`);
  const mgError = (s: string) => json({ type: 'object', properties: { message: { type: 'string' } } }, `Mailgun's error (${s})`);
  const sesV2Error = (s: string) => ({ ...json({ type: 'object', properties: { __type: { type: 'string' }, message: { type: 'string' } } }, `SES v2's error (${s}); its type also in x-amzn-errortype`) });
  const sesV1Error = (s: string) => xml(`SES v1's XML ErrorResponse (${s})`);
  const pmResult = { type: 'object', properties: { To: { type: 'string' }, SubmittedAt: { type: 'string' }, MessageID: { type: 'string' }, ErrorCode: { type: 'integer' }, Message: { type: 'string' } } };
  const mgResult = { type: 'object', properties: { id: { type: 'string' }, message: { type: 'string' } } };
  const form = (description: string) => ({ required: true, description, content: { 'multipart/form-data': { schema: { type: 'object', additionalProperties: true } }, 'application/x-www-form-urlencoded': { schema: { type: 'object', additionalProperties: true } } } });
  const p = PROVIDER_PREFIXES;
  return {
    openapi: '3.1.0',
    info: {
      title: 'ephemail provider API emulations',
      version: '1.0.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description: 'SendGrid v3, Amazon SES (v2 and v1), Postmark, Resend and Mailgun, as their official SDKs call them: point an SDK\'s base URL at its prefix and the mail lands in the ephemail inbox as if it had come over SMTP. Nothing leaves the service; any credentials are taken; each call counts in the caller\'s anonymous per-IP bucket. Requests follow each provider\'s public API reference; docs/providers.md says what is honoured and what is accepted and ignored. Not part of the /api/v1 contract.',
    },
    servers: [{ url: baseUrl }],
    tags: [
      { name: 'sendgrid', description: `SendGrid v3 at ${p.sendgrid}` },
      { name: 'ses', description: `Amazon SES at ${p.ses} (v2 JSON, v1 Query)` },
      { name: 'postmark', description: `Postmark at ${p.postmark}` },
      { name: 'resend', description: `Resend at ${p.resend}` },
      { name: 'mailgun', description: `Mailgun at ${p.mailgun}` },
    ],
    paths: {
      [`${p.sendgrid}/v3/mail/send`]: { post: op('sendgrid', 'sendgridMailSend', 'Send mail (personalizations, content, attachments, template_id + dynamic_template_data)', anyJson('SendGrid v3 mail/send body'), { '202': { description: 'Accepted: empty body, the id in X-Message-Id', headers: { 'x-message-id': { schema: { type: 'string' } } } } }, sgError) },
      [`${p.ses}/v2/email/outbound-emails`]: { post: op('ses', 'sesV2SendEmail', 'SES v2 SendEmail (Content.Simple, Content.Raw, Content.Template)', anyJson('SES v2 SendEmail body'), { '200': json({ type: 'object', properties: { MessageId: { type: 'string' } } }, 'Sent') }, sesV2Error) },
      [`${p.ses}/`]: { post: op('ses', 'sesV1Query', 'SES v1 Query API: Action=SendEmail, SendRawEmail or SendTemplatedEmail', { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', additionalProperties: true } } } }, { '200': xml('The action\'s XML answer with its MessageId') }, sesV1Error) },
      [`${p.postmark}/email`]: { post: op('postmark', 'postmarkEmail', 'Send one email', anyJson('Postmark email'), { '200': json(pmResult, 'Sent') }, pmError) },
      [`${p.postmark}/email/batch`]: { post: op('postmark', 'postmarkBatch', 'Send a batch (a result per message)', anyJson('An array of Postmark emails'), { '200': json({ type: 'array', items: pmResult }, 'A result per message') }, pmError) },
      [`${p.postmark}/email/withTemplate`]: { post: op('postmark', 'postmarkWithTemplate', 'Send with a template (TemplateId or TemplateAlias, TemplateModel kept as text)', anyJson('Postmark templated email'), { '200': json(pmResult, 'Sent') }, pmError) },
      [`${p.postmark}/email/batchWithTemplates`]: { post: op('postmark', 'postmarkBatchWithTemplates', 'Send a batch of templated emails', anyJson('{Messages: [...]}'), { '200': json({ type: 'array', items: pmResult }, 'A result per message') }, pmError) },
      [`${p.resend}/emails`]: { post: op('resend', 'resendEmails', 'Send one email', anyJson('Resend email'), { '200': json({ type: 'object', properties: { id: { type: 'string' } } }, 'Sent') }, rsError) },
      [`${p.resend}/emails/batch`]: { post: op('resend', 'resendBatch', 'Send a batch (every email checked before any is stored)', anyJson('An array of Resend emails'), { '200': json({ type: 'object', properties: { data: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' } } } } } }, 'Sent') }, rsError) },
      [`${p.mailgun}/v3/{domain}/messages`]: { post: { ...op('mailgun', 'mailgunMessages', 'Send a message from a form (from, to, cc, bcc, subject, text, html, attachment, inline, h:, o:, v:)', form('Mailgun message form'), { '200': json(mgResult, 'Queued. Thank you.') }, mgError), parameters: [{ name: 'domain', in: 'path', required: true, description: 'The sender\'s (Mailgun sending) domain', schema: { type: 'string' } }] } },
      [`${p.mailgun}/v3/{domain}/messages.mime`]: { post: { ...op('mailgun', 'mailgunMessagesMime', 'Send a MIME message to `to`', form('to and message (the MIME)'), { '200': json(mgResult, 'Queued. Thank you.') }, mgError), parameters: [{ name: 'domain', in: 'path', required: true, description: 'The sender\'s domain', schema: { type: 'string' } }] } },
    },
  };
}

export function registerProviderDocument(app: FastifyInstance, core: Core): void {
  app.get(PROVIDER_OPENAPI_PATH, { schema: { hide: true } }, async () => providerDocument(core.baseUrl()));
}
