// Amazon SES under /providers/ses (any SigV4 signature, any credentials):
// - v2 (REST JSON): POST /v2/email/outbound-emails with Content.Simple, Content.Raw or
//   Content.Template → {MessageId}; errors with x-amzn-errortype and {__type, message}.
// - v1 (the Query protocol): a form POSTed to / with Action=SendEmail, SendRawEmail or
//   SendTemplatedEmail → the XML answer; errors as an XML ErrorResponse.
// Raw messages go to the destinations the call names (nodemailer's SES transport lists every
// recipient, bcc included, and sends no Bcc header); without any, to the message's To, Cc and Bcc.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal, type MailAddress, type ProviderAttachment, type ProviderMail, type ProviderMailer } from '../../services/provider-mail.ts';
import { base64, newId, plainObject, providerBodyLimit, providerContext, type InflightBudget } from './shared.ts';

const bad = (message: string, field: string) => new ProviderRefusal('invalid', message, { field });
const SES_NS = 'http://ses.amazonaws.com/doc/2010-12-01/';

const xml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);

function stringArray(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) throw bad(`${field} must be a list of email addresses`, field);
  return value as string[];
}

function templateData(text: unknown, field: string): unknown {
  if (text === undefined || text === null || text === '') return {};
  if (typeof text !== 'string') throw bad(`${field} must be a JSON string`, field);
  try {
    return JSON.parse(text);
  } catch {
    throw bad(`${field} is not valid JSON`, field);
  }
}

/** SES v2's SendEmail: a composed message, or a raw one with its destinations. */
type V2Message = { raw: Buffer; recipients: string[] } | { mail: ProviderMail };

function v2Message(body: unknown, mailer: ProviderMailer): V2Message {
  if (!plainObject(body)) throw bad('The request body must be a JSON object.', 'body');
  const dest = body.Destination === undefined || body.Destination === null ? {} : body.Destination;
  if (!plainObject(dest)) throw bad('Destination must be an object', 'Destination');
  const to = mailer.addresses(stringArray(dest.ToAddresses, 'Destination.ToAddresses'), 'Destination.ToAddresses');
  const cc = mailer.addresses(stringArray(dest.CcAddresses, 'Destination.CcAddresses'), 'Destination.CcAddresses');
  const bcc = mailer.addresses(stringArray(dest.BccAddresses, 'Destination.BccAddresses'), 'Destination.BccAddresses');
  const content = body.Content;
  if (!plainObject(content)) throw bad('1 validation error detected: Value null at \'content\' failed to satisfy constraint: Member must not be null', 'Content');
  if (plainObject(content.Raw)) {
    if (typeof content.Raw.Data !== 'string' || content.Raw.Data === '') throw bad('Content.Raw.Data is required', 'Content.Raw.Data');
    return { raw: base64(content.Raw.Data, 'Content.Raw.Data'), recipients: [...to, ...cc, ...bcc].map((a) => a.address) };
  }
  const fromText = body.FromEmailAddress;
  if (typeof fromText !== 'string' || fromText === '') throw bad('FromEmailAddress is required for Simple and Template content', 'FromEmailAddress');
  const from = mailer.addresses(fromText, 'FromEmailAddress');
  if (from.length !== 1) throw bad(`Illegal address: ${fromText.slice(0, 200)}`, 'FromEmailAddress');
  if (to.length + cc.length + bcc.length === 0) throw bad('Destination must name at least one recipient', 'Destination');
  const replyTo = mailer.addresses(stringArray(body.ReplyToAddresses, 'ReplyToAddresses'), 'ReplyToAddresses');
  const part = plainObject(content.Simple) ? content.Simple : plainObject(content.Template) ? content.Template : null;
  if (!part) throw bad('Content must hold Simple, Raw or Template', 'Content');
  const headers: Record<string, string> = {};
  if (part.Headers !== undefined && part.Headers !== null) {
    if (!Array.isArray(part.Headers)) throw bad('Headers must be a list of {Name, Value}', 'Content.Headers');
    for (const h of part.Headers) {
      if (!plainObject(h) || typeof h.Name !== 'string') throw bad('Each header needs a Name and a Value', 'Content.Headers');
      headers[h.Name] = String(h.Value ?? '');
    }
  }
  if (Array.isArray(body.EmailTags)) {
    const tags = body.EmailTags.filter(plainObject).map((t) => `${String(t.Name)}=${String(t.Value ?? '')}`);
    if (tags.length) headers['X-SES-Message-Tags'] = tags.join(', ');
  }
  const attachments: ProviderAttachment[] = [];
  if (part.Attachments !== undefined && part.Attachments !== null) {
    if (!Array.isArray(part.Attachments)) throw bad('Attachments must be a list', 'Content.Attachments');
    part.Attachments.forEach((a, i) => {
      const f = `Content.Attachments.${i}`;
      if (!plainObject(a)) throw bad(`${f} must be an object`, f);
      if (typeof a.FileName !== 'string' || a.FileName === '') throw bad(`${f}.FileName is required`, `${f}.FileName`);
      const inline = String(a.ContentDisposition ?? '').toUpperCase() === 'INLINE';
      attachments.push({ filename: a.FileName, contentType: typeof a.ContentType === 'string' ? a.ContentType : undefined, content: base64(a.RawContent, `${f}.RawContent`), cid: inline && typeof a.ContentId === 'string' ? a.ContentId : undefined });
    });
  }
  const base = { from: from[0], to, cc, bcc, replyTo, headers, attachments };
  if (part === content.Simple) {
    const subject = plainObject(part.Subject) ? part.Subject.Data : undefined;
    if (typeof subject !== 'string') throw bad('Content.Simple.Subject.Data is required', 'Content.Simple.Subject');
    const b = plainObject(part.Body) ? part.Body : {};
    const text = plainObject(b.Text) && typeof b.Text.Data === 'string' ? b.Text.Data : undefined;
    const html = plainObject(b.Html) && typeof b.Html.Data === 'string' ? b.Html.Data : undefined;
    if (text === undefined && html === undefined) throw bad('Content.Simple.Body needs Text or Html', 'Content.Simple.Body');
    return { mail: { ...base, subject, text, html } };
  }
  const id = part.TemplateName ?? part.TemplateArn ?? (plainObject(part.TemplateContent) ? 'inline template' : undefined);
  if (typeof id !== 'string') throw bad('Content.Template needs TemplateName, TemplateArn or TemplateContent', 'Content.Template');
  const tc = plainObject(part.TemplateContent) ? part.TemplateContent : {};
  return { mail: { ...base, subject: typeof tc.Subject === 'string' ? tc.Subject : '', template: { id, data: templateData(part.TemplateData, 'Content.Template.TemplateData') } } };
}

/** A Query list parameter: Name.member.1, Name.member.2, … */
function members(form: URLSearchParams, name: string): string[] {
  const out: string[] = [];
  for (let i = 1; i <= 1000; i++) {
    const v = form.get(`${name}.member.${i}`);
    if (v === null) break;
    out.push(v);
  }
  return out;
}

export function registerSesV2(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  const TYPES: Record<ProviderRefusal['kind'], [number, string]> = {
    invalid: [400, 'BadRequestException'],
    recipient: [400, 'MessageRejected'],
    too_large: [400, 'MessageRejected'],
    rate_limited: [429, 'TooManyRequestsException'],
    not_found: [404, 'NotFoundException'],
    unavailable: [503, 'ServiceUnavailable'],
  };
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const [status, type] = TYPES[r.kind];
      return reply.code(status).header('x-amzn-errortype', type).header('x-amzn-requestid', newId.uuid()).type('application/json').send({ __type: type, message: r.message });
    },
  });
  app.post('/email/outbound-emails', { bodyLimit: providerBodyLimit(core), schema: { hide: true } }, async (request, reply) => {
    const m = v2Message(request.body, mailer);
    const MessageId = newId.ses(core.clock.now());
    const emulation = { provider: 'Amazon SES v2', clientIp: request.ip, messageId: `${MessageId}@email.amazonses.com` };
    if ('raw' in m) await mailer.sendRaw(m.raw, m.recipients, emulation);
    else await mailer.send(m.mail, emulation);
    reply.header('x-amzn-requestid', newId.uuid());
    return { MessageId };
  });
}

export function registerSesV1(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  const CODES: Record<ProviderRefusal['kind'], [number, string]> = {
    invalid: [400, 'InvalidParameterValue'],
    recipient: [400, 'MessageRejected'],
    too_large: [400, 'MessageRejected'],
    rate_limited: [429, 'Throttling'],
    not_found: [404, 'InvalidAction'],
    unavailable: [503, 'ServiceUnavailable'],
  };
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const [status, fallback] = CODES[r.kind];
      const code = r.kind === 'invalid' && r.field === 'Action' ? 'InvalidAction' : r.kind === 'invalid' && /^Missing /.test(r.message) ? 'MissingParameter' : fallback;
      const body = `<ErrorResponse xmlns="${SES_NS}">\n  <Error>\n    <Type>${status >= 500 ? 'Receiver' : 'Sender'}</Type>\n    <Code>${code}</Code>\n    <Message>${xml(r.message)}</Message>\n  </Error>\n  <RequestId>${newId.uuid()}</RequestId>\n</ErrorResponse>\n`;
      return reply.code(status).type('text/xml').send(body);
    },
  }, { form: true });

  const answer = (action: string, messageId: string) =>
    `<${action}Response xmlns="${SES_NS}">\n  <${action}Result>\n    <MessageId>${messageId}</MessageId>\n  </${action}Result>\n  <ResponseMetadata>\n    <RequestId>${newId.uuid()}</RequestId>\n  </ResponseMetadata>\n</${action}Response>\n`;
  const required = (form: URLSearchParams, name: string) => {
    const v = form.get(name);
    if (v === null || v === '') throw bad(`Missing required parameter ${name}`, name);
    return v;
  };
  const recipients = (form: URLSearchParams, prefix: string): Pick<ProviderMail, 'to' | 'cc' | 'bcc'> => ({
    to: mailer.addresses(members(form, `${prefix}.ToAddresses`), `${prefix}.ToAddresses`),
    cc: mailer.addresses(members(form, `${prefix}.CcAddresses`), `${prefix}.CcAddresses`),
    bcc: mailer.addresses(members(form, `${prefix}.BccAddresses`), `${prefix}.BccAddresses`),
  });
  const single = (text: string, field: string): MailAddress => {
    const list = mailer.addresses(text, field);
    if (list.length !== 1) throw bad(`Illegal address: ${text.slice(0, 200)}`, field);
    return list[0];
  };
  const tags = (form: URLSearchParams): Record<string, string> => {
    const out: string[] = [];
    for (let i = 1; i <= 50; i++) {
      const name = form.get(`Tags.member.${i}.Name`);
      if (name === null) break;
      out.push(`${name}=${form.get(`Tags.member.${i}.Value`) ?? ''}`);
    }
    return out.length ? { 'X-SES-Message-Tags': out.join(', ') } : {};
  };

  app.post('/', { bodyLimit: providerBodyLimit(core), schema: { hide: true } }, async (request: FastifyRequest, reply) => {
    const form = request.body;
    if (!(form instanceof URLSearchParams)) throw bad('The Query API takes an application/x-www-form-urlencoded form', 'Action');
    const action = form.get('Action');
    const MessageId = newId.ses(core.clock.now());
    const emulation = { provider: 'Amazon SES v1', clientIp: request.ip, messageId: `${MessageId}@email.amazonses.com` };
    if (action === 'SendRawEmail') {
      const raw = base64(required(form, 'RawMessage.Data'), 'RawMessage.Data');
      await mailer.sendRaw(raw, mailer.addresses(members(form, 'Destinations'), 'Destinations').map((a) => a.address), emulation);
    } else if (action === 'SendEmail') {
      const from = single(required(form, 'Source'), 'Source');
      const dest = recipients(form, 'Destination');
      const subject = required(form, 'Message.Subject.Data');
      const text = form.get('Message.Body.Text.Data') ?? undefined;
      const html = form.get('Message.Body.Html.Data') ?? undefined;
      if (text === undefined && html === undefined) throw bad('Missing required parameter Message.Body (Text or Html)', 'Message.Body');
      const replyTo = mailer.addresses(members(form, 'ReplyToAddresses'), 'ReplyToAddresses');
      await mailer.send({ from, ...dest, replyTo, subject, text, html, attachments: [], headers: tags(form) }, emulation);
    } else if (action === 'SendTemplatedEmail') {
      const from = single(required(form, 'Source'), 'Source');
      const template = required(form, 'Template');
      const replyTo = mailer.addresses(members(form, 'ReplyToAddresses'), 'ReplyToAddresses');
      await mailer.send({ from, ...recipients(form, 'Destination'), replyTo, subject: '', attachments: [], headers: tags(form), template: { id: template, data: templateData(form.get('TemplateData'), 'TemplateData') } }, emulation);
    } else {
      throw bad(`The action ${String(action ?? '(none)').slice(0, 60)} is not valid for this emulation: SendEmail, SendRawEmail and SendTemplatedEmail are`, 'Action');
    }
    return reply.type('text/xml').send(answer(action, MessageId));
  });
}
