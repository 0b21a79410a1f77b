// Mailgun under /providers/mailgun: POST /v3/{domain}/messages (a multipart or urlencoded form) and
// POST /v3/{domain}/messages.mime → {id, message: "Queued. Thank you."}. `{domain}` is the
// sender's domain (a Mailgun sending domain), not one ephemail serves. Errors: {message}.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal, type ProviderMailer } from '../../services/provider-mail.ts';
import { newId, providerBodyLimit, providerContext, type InflightBudget, type MultipartForm } from './shared.ts';

const bad = (message: string, field: string) => new ProviderRefusal('invalid', message, { field });

/** A urlencoded body as the multipart form's shape (fields only). */
function formOf(body: unknown): MultipartForm {
  if (body instanceof URLSearchParams) {
    const fields = new Map<string, string[]>();
    for (const [k, v] of body) fields.set(k, [...(fields.get(k) ?? []), v]);
    return { fields, files: [] };
  }
  if (body && typeof body === 'object' && 'fields' in body) return body as MultipartForm;
  throw bad('The body must be a multipart/form-data or application/x-www-form-urlencoded form.', 'body');
}

export function registerMailgun(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const status = r.kind === 'rate_limited' ? 429 : r.kind === 'too_large' ? 413 : r.kind === 'not_found' ? 404 : r.kind === 'unavailable' ? 503 : 400;
      return reply.code(status).type('application/json').send({ message: r.message });
    },
  }, { form: true, multipart: true });
  const limit = providerBodyLimit(core);
  const idFor = (domain: string) => {
    const now = new Date(core.clock.now()).toISOString().replace(/\D/g, '').slice(0, 14);
    return `${now}.${newId.hex(8)}@${domain}`;
  };
  const emulation = (request: FastifyRequest, messageId: string) => ({ provider: 'Mailgun', clientIp: request.ip, messageId });
  const list = (form: MultipartForm, name: string) => mailer.addresses(form.fields.get(name) ?? [], name);
  const one = (form: MultipartForm, name: string) => form.fields.get(name)?.[0];

  app.post<{ Params: { domain: string } }>('/v3/:domain/messages', { bodyLimit: limit, schema: { hide: true } }, async (request) => {
    const form = formOf(request.body);
    const fromText = one(form, 'from');
    if (!fromText) throw bad("from parameter is missing", 'from');
    const from = mailer.addresses(fromText, 'from');
    if (from.length !== 1) throw bad(`from parameter is not a valid address. please check documentation`, 'from');
    const to = list(form, 'to');
    if (to.length === 0) throw bad('to parameter is missing', 'to');
    const template = one(form, 'template');
    const subject = one(form, 'subject');
    if (subject === undefined && !template) throw bad('subject parameter is missing', 'subject');
    const text = one(form, 'text');
    const html = one(form, 'html');
    if (!text && !html && !template && !one(form, 'amp-html')) throw bad('Need at least one of \'text\', \'html\' or \'template\' parameters specified', 'text');
    const headers: Record<string, string> = {};
    const variables: Record<string, string> = {};
    const options: string[] = [];
    for (const [name, values] of form.fields) {
      if (name.startsWith('h:')) headers[name.slice(2)] = values[values.length - 1];
      else if (name.startsWith('v:')) variables[name.slice(2)] = values[values.length - 1];
      else if (name.startsWith('o:')) options.push(`${name.slice(2)}=${values.join(',')}`);
    }
    if (Object.keys(variables).length) headers['X-Mailgun-Variables'] = JSON.stringify(variables);
    if (options.length) headers['X-Mailgun-Options'] = options.join('; ');
    let data: unknown = {};
    const t = one(form, 't:variables') ?? one(form, 'h:X-Mailgun-Variables');
    if (template && t) {
      try {
        data = JSON.parse(t);
      } catch {
        throw bad('t:variables must be valid JSON', 't:variables');
      }
    } else if (template) {
      data = variables;
    }
    const messageId = idFor(request.params.domain);
    await mailer.send({
      from: from[0],
      to,
      cc: list(form, 'cc'),
      bcc: list(form, 'bcc'),
      replyTo: mailer.addresses(headers['Reply-To'] ?? headers['reply-to'] ?? [], 'h:Reply-To'),
      subject: subject ?? '',
      text,
      html,
      headers,
      template: template ? { id: template, data } : undefined,
      attachments: form.files
        .filter((f) => f.field === 'attachment' || f.field === 'inline')
        .map((f) => ({ filename: f.filename || undefined, contentType: f.contentType, content: f.content, cid: f.field === 'inline' ? f.filename || undefined : undefined })),
    }, emulation(request, messageId));
    return { id: `<${messageId}>`, message: 'Queued. Thank you.' };
  });

  app.post<{ Params: { domain: string } }>('/v3/:domain/messages.mime', { bodyLimit: limit, schema: { hide: true } }, async (request) => {
    const form = formOf(request.body);
    const file = form.files.find((f) => f.field === 'message');
    const raw = file ? file.content : form.fields.get('message')?.[0] !== undefined ? Buffer.from(form.fields.get('message')![0]) : null;
    if (!raw) throw bad('message parameter is missing', 'message');
    const to = list(form, 'to');
    if (to.length === 0) throw bad('to parameter is missing', 'to');
    const messageId = idFor(request.params.domain);
    await mailer.sendRaw(raw, to.map((a) => a.address), emulation(request, messageId));
    return { id: `<${messageId}>`, message: 'Queued. Thank you.' };
  });
}
