// Resend under /providers/resend: POST /emails → {id}; POST /emails/batch → {data: [{id}]}.
// Errors as Resend writes them: {statusCode, name, message} (docs/providers.md).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal, type ProviderMail, type ProviderMailer } from '../../services/provider-mail.ts';
import { base64, newId, plainObject, providerBodyLimit, providerContext, type InflightBudget, str } from './shared.ts';

const bad = (message: string, field: string) => new ProviderRefusal('invalid', message, { field });

function stringList(value: unknown, field: string): string | string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' || (Array.isArray(value) && value.every((v) => typeof v === 'string'))) return value as string | string[];
  throw bad(`The \`${field}\` field must be a string or an array of strings.`, field);
}

function resendMessage(body: unknown, mailer: ProviderMailer, at = ''): ProviderMail {
  if (!plainObject(body)) throw bad('The request body must be a JSON object.', at || 'body');
  const f = (name: string) => (at ? `${at}.${name}` : name);
  const fromText = str(body.from, f('from'));
  if (!fromText) throw new ProviderRefusal('invalid', `Missing \`from\` field.`, { field: f('from') });
  const from = mailer.addresses(fromText, f('from'));
  if (from.length !== 1) throw bad('The `from` field must be one address: `email@example.com` or `Name <email@example.com>`.', f('from'));
  const to = mailer.addresses(stringList(body.to, f('to')), f('to'));
  if (to.length === 0) throw bad('Missing `to` field.', f('to'));
  if (to.length > 50) throw bad('The `to` field may hold at most 50 addresses.', f('to'));
  const template = body.template;
  let tpl: ProviderMail['template'];
  if (template !== undefined && template !== null) {
    if (!plainObject(template) || typeof template.id !== 'string') throw bad('The `template` field must be an object with an `id`.', f('template'));
    tpl = { id: template.id, data: template.variables ?? {} };
  }
  const subject = str(body.subject, f('subject'));
  if (subject === undefined && !tpl) throw bad('Missing `subject` field.', f('subject'));
  const text = str(body.text, f('text'));
  const html = str(body.html, f('html'));
  if (body.react !== undefined && body.react !== null) throw bad('The `react` field is rendered by the SDK, never sent: send `html`.', f('react'));
  const headers: Record<string, string> = {};
  if (body.headers !== undefined && body.headers !== null) {
    if (!plainObject(body.headers)) throw bad('The `headers` field must be an object.', f('headers'));
    for (const [k, v] of Object.entries(body.headers)) {
      if (typeof v !== 'string') throw bad(`The header \`${k}\` must be a string.`, f(`headers.${k}`));
      headers[k] = v;
    }
  }
  if (Array.isArray(body.tags)) {
    const tags = body.tags.filter(plainObject).map((t) => `${String(t.name)}=${String(t.value ?? '')}`);
    if (tags.length) headers['X-Resend-Tags'] = tags.join(', ');
  }
  const attachments = body.attachments === undefined || body.attachments === null ? [] : body.attachments;
  if (!Array.isArray(attachments)) throw bad('The `attachments` field must be an array.', f('attachments'));
  return {
    from: from[0],
    to,
    cc: mailer.addresses(stringList(body.cc, f('cc')), f('cc')),
    bcc: mailer.addresses(stringList(body.bcc, f('bcc')), f('bcc')),
    replyTo: mailer.addresses(stringList(body.reply_to, f('reply_to')), f('reply_to')),
    subject: subject ?? '',
    text,
    html,
    headers,
    template: tpl,
    attachments: attachments.map((a, i) => {
      const af = f(`attachments[${i}]`);
      if (!plainObject(a)) throw bad('Each attachment must be an object.', af);
      if (a.path !== undefined && a.path !== null) throw new ProviderRefusal('invalid', `Attachment \`path\` URLs are not fetched here (nothing leaves ephemail): send the bytes as \`content\` (${af}).`, { field: `${af}.path` });
      if (typeof a.content !== 'string') throw bad(`The attachment needs \`content\` (base64) (${af}).`, `${af}.content`);
      return { filename: str(a.filename, `${af}.filename`), contentType: str(a.content_type, `${af}.content_type`), content: base64(a.content, `${af}.content`), cid: str(a.content_id, `${af}.content_id`) };
    }),
  };
}

const NAMES: Record<ProviderRefusal['kind'], [number, string]> = {
  invalid: [422, 'validation_error'],
  recipient: [422, 'validation_error'],
  too_large: [413, 'validation_error'],
  rate_limited: [429, 'rate_limit_exceeded'],
  not_found: [404, 'not_found'],
  unavailable: [500, 'application_error'],
};

export function registerResend(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const missing = r.kind === 'invalid' && /^Missing /.test(r.message);
      const [statusCode, name] = missing ? [422, 'missing_required_field'] : NAMES[r.kind];
      return reply.code(statusCode).type('application/json').send({ statusCode, name, message: r.message });
    },
  });
  const emulation = (request: FastifyRequest, messageId: string) => ({ provider: 'Resend', clientIp: request.ip, messageId });
  app.post('/emails', { bodyLimit: providerBodyLimit(core), schema: { hide: true } }, async (request) => {
    const mail = resendMessage(request.body, mailer);
    const id = newId.uuid();
    await mailer.send(mail, emulation(request, id));
    return { id };
  });
  app.post('/emails/batch', { bodyLimit: providerBodyLimit(core), schema: { hide: true } }, async (request) => {
    const body = request.body;
    if (!Array.isArray(body) || body.length === 0) throw bad('The batch must be a non-empty array of emails.', 'body');
    if (body.length > 100) throw bad('A batch holds at most 100 emails.', 'body');
    // (x-batch-validation strict or permissive: either way every email is checked before any is stored)
    const mails = body.map((b, i) => resendMessage(b, mailer, `[${i}]`));
    for (const m of mails) mailer.check(m);
    const data: { id: string }[] = [];
    for (const m of mails) {
      const id = newId.uuid();
      await mailer.send(m, emulation(request, id));
      data.push({ id });
    }
    return { data };
  });
}
