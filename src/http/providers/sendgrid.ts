// SendGrid v3 under /providers/sendgrid: POST /v3/mail/send → 202, empty body, X-Message-Id.
// Errors as SendGrid writes them: {errors: [{message, field, help}]} (docs/providers.md).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal, type MailAddress, type ProviderAttachment, type ProviderMail, type ProviderMailer } from '../../services/provider-mail.ts';
import { base64, newId, plainObject, providerBodyLimit, providerContext, type InflightBudget, str } from './shared.ts';

const HELP = 'http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html';
const bad = (message: string, field: string) => new ProviderRefusal('invalid', message, { field });

function address(value: unknown, field: string): MailAddress {
  if (!plainObject(value) || typeof value.email !== 'string' || !value.email.includes('@')) {
    throw bad(`The ${field} object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.`, `${field}.email`);
  }
  const name = str(value.name, `${field}.name`);
  return name ? { address: value.email, name } : { address: value.email };
}

function addresses(value: unknown, field: string): MailAddress[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw bad(`The ${field} parameter must be an array of objects with an email parameter.`, field);
  return value.map((v, i) => address(v, `${field}[${i}]`));
}

function stringRecord(value: unknown, field: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!plainObject(value)) throw bad(`The ${field} parameter must be an object of strings.`, field);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw bad(`The value of ${field}.${k} must be a string.`, `${field}.${k}`);
    out[k] = v;
  }
  return out;
}

/** The messages a v3 mail/send body describes: one per personalization, every field checked first. */
export function sendgridMessages(body: unknown): ProviderMail[] {
  if (!plainObject(body)) throw bad('The request body must be a JSON object.', '');
  const templateId = str(body.template_id, 'template_id');
  const from = address(body.from, 'from');
  const replyTo = body.reply_to_list !== undefined ? addresses(body.reply_to_list, 'reply_to_list') : body.reply_to !== undefined && body.reply_to !== null ? [address(body.reply_to, 'reply_to')] : [];
  const subject = str(body.subject, 'subject');
  let text: string | undefined;
  let html: string | undefined;
  if (body.content !== undefined && body.content !== null) {
    if (!Array.isArray(body.content) || body.content.length === 0) throw bad('The content parameter must be an array of at least one object with a type and a value.', 'content');
    body.content.forEach((c, i) => {
      if (!plainObject(c) || typeof c.type !== 'string' || typeof c.value !== 'string') throw bad('Each content object requires a type and a value.', `content.${i}`);
      if (c.value === '') throw bad('The content value must be a string at least one character in length.', `content.${i}.value`);
      if (c.type.toLowerCase() === 'text/plain') text = c.value;
      else if (c.type.toLowerCase() === 'text/html') html = c.value;
      else throw bad(`Content of type ${c.type.slice(0, 60)} is not taken here: text/plain and text/html are.`, `content.${i}.type`);
    });
  } else if (!templateId) {
    throw bad('Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block. We typically suggest both text/plain and text/html blocks are included, but only one block is required.', 'content');
  }
  const attachments: ProviderAttachment[] = [];
  if (body.attachments !== undefined && body.attachments !== null) {
    if (!Array.isArray(body.attachments)) throw bad('The attachments parameter must be an array.', 'attachments');
    body.attachments.forEach((a, i) => {
      if (!plainObject(a)) throw bad('Each attachment must be an object.', `attachments.${i}`);
      const filename = str(a.filename, `attachments.${i}.filename`, true);
      if (typeof a.content !== 'string' || a.content === '') throw bad('The attachment content is required.', `attachments.${i}.content`);
      const content = base64(a.content, `attachments.${i}.content`);
      const inline = a.disposition === 'inline';
      const cid = str(a.content_id, `attachments.${i}.content_id`);
      if (inline && !cid) throw bad('The content_id parameter is required when the disposition is inline.', `attachments.${i}.content_id`);
      attachments.push({ filename, contentType: str(a.type, `attachments.${i}.type`), content, cid: inline ? cid : undefined });
    });
  }
  const headers = stringRecord(body.headers, 'headers');
  const categories = body.categories;
  if (categories !== undefined && (!Array.isArray(categories) || categories.some((c) => typeof c !== 'string'))) throw bad('The categories parameter must be an array of strings.', 'categories');
  const customArgs = stringRecord(body.custom_args, 'custom_args');
  if (!Array.isArray(body.personalizations) || body.personalizations.length === 0) {
    throw bad('The personalizations field is required and must have at least one personalization.', 'personalizations');
  }
  if (body.personalizations.length > 1000) throw bad('The personalizations field may have at most 1000 personalizations.', 'personalizations');
  return body.personalizations.map((p, i): ProviderMail => {
    const at = `personalizations.${i}`;
    if (!plainObject(p)) throw bad('Each personalization must be an object.', at);
    const to = addresses(p.to, `${at}.to`);
    if (to.length === 0) throw bad('The to array is required for all personalization objects, and must have at least one email object with a valid email address.', `${at}.to`);
    const pSubject = str(p.subject, `${at}.subject`) ?? subject;
    if (!pSubject && !templateId) throw bad('The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.', 'subject');
    const pHeaders = { ...headers, ...stringRecord(p.headers, `${at}.headers`) };
    const args = { ...customArgs, ...stringRecord(p.custom_args, `${at}.custom_args`) };
    if (categories?.length) pHeaders['X-SendGrid-Categories'] = (categories as string[]).join(', ');
    if (Object.keys(args).length) pHeaders['X-SendGrid-Custom-Args'] = JSON.stringify(args);
    return {
      from: p.from !== undefined ? address(p.from, `${at}.from`) : from,
      to,
      cc: addresses(p.cc, `${at}.cc`),
      bcc: addresses(p.bcc, `${at}.bcc`),
      replyTo,
      subject: pSubject ?? '',
      text,
      html,
      attachments,
      headers: pHeaders,
      template: templateId ? { id: templateId, data: p.dynamic_template_data ?? p.substitutions ?? {} } : undefined,
    };
  });
}

export function registerSendgrid(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const status = r.kind === 'rate_limited' ? 429 : r.kind === 'too_large' ? 413 : r.kind === 'not_found' ? 404 : r.kind === 'unavailable' ? 503 : 400;
      return reply.code(status).type('application/json').send({ errors: [{ message: r.message, field: r.field, help: r.field !== null ? `${HELP}#message.${r.field.replace(/\.\d+/g, '')}` : null }] });
    },
  });
  app.post('/v3/mail/send', { bodyLimit: providerBodyLimit(core), schema: { hide: true } }, async (request, reply) => {
    const messages = sendgridMessages(request.body);
    const id = newId.sendgrid();
    // every recipient of every personalization is checked before anything is stored
    for (const m of messages) mailer.check(m);
    for (const [i, m] of messages.entries()) await mailer.send(m, { provider: 'SendGrid v3', clientIp: request.ip, messageId: i === 0 ? id : `${id}.${i}` });
    return reply.code(202).header('x-message-id', id).send();
  });
}
