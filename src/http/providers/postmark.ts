// Postmark under /providers/postmark: POST /email, /email/batch, /email/withTemplate,
// /email/batchWithTemplates → {To, SubmittedAt, MessageID, ErrorCode: 0, Message: "OK"} (an array
// for batches, one result per message). Errors as Postmark writes them: {ErrorCode, Message}.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal, type ProviderMail, type ProviderMailer } from '../../services/provider-mail.ts';
import { base64, newId, plainObject, providerBodyLimit, providerContext, type InflightBudget, str } from './shared.ts';

/** Postmark's "Invalid email request". */
const INVALID = 300;
const bad = (message: string, field: string) => new ProviderRefusal('invalid', message, { field });

function postmarkMessage(body: unknown, mailer: ProviderMailer, template: boolean): ProviderMail {
  if (!plainObject(body)) throw bad('The request body must be a JSON object.', 'body');
  const fromText = str(body.From, 'From');
  if (!fromText) throw bad("Invalid 'From' address: ''.", 'From');
  const from = mailer.addresses(fromText, 'From');
  if (from.length !== 1) throw bad(`Invalid 'From' address: '${fromText.slice(0, 200)}'.`, 'From');
  const to = mailer.addresses(str(body.To, 'To'), 'To');
  const cc = mailer.addresses(str(body.Cc, 'Cc'), 'Cc');
  const bcc = mailer.addresses(str(body.Bcc, 'Bcc'), 'Bcc');
  if (to.length + cc.length + bcc.length === 0) throw bad('Zero recipients specified', 'To');
  let tpl: ProviderMail['template'];
  if (template) {
    const id = body.TemplateId ?? body.TemplateAlias;
    if (typeof id !== 'number' && typeof id !== 'string') throw bad('Either TemplateId or TemplateAlias must be given.', 'TemplateId');
    tpl = { id: String(id), data: body.TemplateModel ?? {} };
  }
  const text = str(body.TextBody, 'TextBody');
  const html = str(body.HtmlBody, 'HtmlBody');
  if (!template && !text && !html) throw bad('Provide either email TextBody or HtmlBody or both.', 'TextBody');
  const headers: Record<string, string> = {};
  if (body.Headers !== undefined && body.Headers !== null) {
    if (!Array.isArray(body.Headers)) throw bad("'Headers' must be an array of {Name, Value}.", 'Headers');
    for (const h of body.Headers) {
      if (!plainObject(h) || typeof h.Name !== 'string') throw bad("Each header needs a 'Name' and a 'Value'.", 'Headers');
      headers[h.Name] = String(h.Value ?? '');
    }
  }
  if (typeof body.Tag === 'string' && body.Tag) headers['X-PM-Tag'] = body.Tag;
  if (plainObject(body.Metadata)) for (const [k, v] of Object.entries(body.Metadata)) if (/^[\w-]{1,60}$/.test(k)) headers[`X-PM-Metadata-${k}`] = String(v);
  if (typeof body.MessageStream === 'string' && body.MessageStream) headers['X-PM-Message-Stream'] = body.MessageStream;
  const attachments = body.Attachments ?? [];
  if (!Array.isArray(attachments)) throw bad("'Attachments' must be an array.", 'Attachments');
  return {
    from: from[0],
    to,
    cc,
    bcc,
    replyTo: mailer.addresses(str(body.ReplyTo, 'ReplyTo'), 'ReplyTo'),
    subject: str(body.Subject, 'Subject') ?? '',
    text,
    html,
    headers,
    template: tpl,
    attachments: attachments.map((a, i) => {
      if (!plainObject(a)) throw bad(`Attachment ${i} must be an object.`, 'Attachments');
      const cid = str(a.ContentID, `Attachments[${i}].ContentID`)?.replace(/^cid:/i, '');
      return { filename: str(a.Name, `Attachments[${i}].Name`, true), contentType: str(a.ContentType, `Attachments[${i}].ContentType`), content: base64(a.Content, `Attachments[${i}].Content`), cid: cid || undefined };
    }),
  };
}

const STATUS: Record<ProviderRefusal['kind'], [number, number]> = {
  invalid: [422, INVALID],
  recipient: [422, INVALID],
  too_large: [422, INVALID],
  rate_limited: [429, 429],
  not_found: [404, 404],
  unavailable: [503, 503],
};

export function registerPostmark(app: FastifyInstance, core: Core, mailer: ProviderMailer, budget: InflightBudget): void {
  providerContext(app, core, budget, {
    refuse(reply, r) {
      const [status, ErrorCode] = STATUS[r.kind];
      return reply.code(status).type('application/json').send({ ErrorCode, Message: r.message });
    },
  });
  const limit = providerBodyLimit(core);

  /** One message: stored, and its Postmark result. */
  const sendOne = async (request: FastifyRequest, mail: ProviderMail) => {
    const MessageID = newId.uuid();
    await mailer.send(mail, { provider: 'Postmark', clientIp: request.ip, messageId: MessageID });
    return { To: [...mail.to, ...mail.cc].map((a) => a.address).join(', '), SubmittedAt: new Date(core.clock.now()).toISOString(), MessageID, ErrorCode: 0, Message: 'OK' };
  };
  /** A batch, as Postmark answers one: a result per message, a refused one with its ErrorCode (the others are sent). */
  const sendBatch = async (request: FastifyRequest, list: unknown, template: boolean) => {
    if (!Array.isArray(list) || list.length === 0) throw bad('The batch must be a non-empty array of messages.', 'body');
    if (list.length > 500) throw bad('A batch holds at most 500 messages.', 'body');
    const results = [];
    for (const item of list) {
      try {
        const mail = postmarkMessage(item, mailer, template);
        mailer.check(mail);
        results.push(await sendOne(request, mail));
      } catch (err) {
        if (!(err instanceof ProviderRefusal) || err.kind === 'rate_limited' || err.kind === 'unavailable') throw err;
        results.push({ ErrorCode: STATUS[err.kind][1], Message: err.message, To: plainObject(item) ? String(item.To ?? '') : '' });
      }
    }
    return results;
  };

  app.post('/email', { bodyLimit: limit, schema: { hide: true } }, async (request) => sendOne(request, postmarkMessage(request.body, mailer, false)));
  app.post('/email/withTemplate', { bodyLimit: limit, schema: { hide: true } }, async (request) => sendOne(request, postmarkMessage(request.body, mailer, true)));
  app.post('/email/batch', { bodyLimit: limit, schema: { hide: true } }, async (request) => sendBatch(request, request.body, false));
  app.post('/email/batchWithTemplates', { bodyLimit: limit, schema: { hide: true } }, async (request) => {
    const body = request.body;
    if (!plainObject(body) || !Array.isArray(body.Messages)) throw bad("The body must be {\"Messages\": [...]}.", 'Messages');
    return sendBatch(request, body.Messages, true);
  });
}
