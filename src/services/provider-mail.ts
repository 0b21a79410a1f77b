// Mail an app hands to an email provider's HTTP API (SendGrid, SES, Postmark, Resend, Mailgun), as
// ephemail emulates them (http/providers/): composed once into RFC 5322 MIME by nodemailer's
// MailComposer (through its stream transport, which only writes the message into a buffer: nothing
// leaves the service), then taken the path of SMTP mail: the same recipient rule (served domains
// only), the same caps per client and per address, the same size limit, one stored copy per
// recipient. There is no SMTP envelope: the message is stored without one, so its authentication
// verdicts say it did not come over SMTP. `mailed_by` is the From domain.
import type { SendMailOptions, Transporter } from 'nodemailer';
import PostalMime, { addressParser } from 'postal-mime';
import { mailedByOf, parseAddress } from '../domain/address.ts';
import { ipBucket } from '../domain/limits.ts';
import type { StoredEmail } from '../store/store.ts';
import type { Core } from './core.ts';
import { createIngest } from './ingest.ts';

export interface MailAddress {
  address: string;
  name?: string;
}

export interface ProviderAttachment {
  filename?: string;
  contentType?: string;
  content: Buffer;
  /** An inline part's Content-ID (without <>): referenced from the HTML as cid:… */
  cid?: string;
}

/** A message as a provider's API describes it, in the provider-independent shape composed here. */
export interface ProviderMail {
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  /** Delivered to, never named in a header. */
  bcc: MailAddress[];
  replyTo: MailAddress[];
  subject: string;
  text?: string;
  html?: string;
  attachments: ProviderAttachment[];
  /** Custom headers; the structural ones (From, To, Content-Type…) are left to the composer. */
  headers: Record<string, string>;
  /** A provider template there is nothing to render: its id and data become a readable text part. */
  template?: { id: string; data: unknown };
}

/** Who sent it: the emulation (named in the Received trace), the client, the provider's message id. */
export interface Emulation {
  /** e.g. "SendGrid v3": named in the Received header. */
  provider: string;
  clientIp: string;
  /** The id the provider's answer carries; the Message-ID is `<messageId>` unless it has an @ of its own. */
  messageId: string;
}

export type RefusalKind = 'invalid' | 'recipient' | 'too_large' | 'rate_limited' | 'not_found' | 'unavailable';

/** Why a provider call stored nothing; each provider's face says it in that provider's shape. */
export class ProviderRefusal extends Error {
  readonly kind: RefusalKind;
  /** The request field at fault (SendGrid's `field`, the SES parameter), when one is. */
  readonly field: string | null;
  readonly retryAfter: number | null;
  constructor(kind: RefusalKind, message: string, options: { field?: string | null; retryAfter?: number } = {}) {
    super(message);
    this.name = 'ProviderRefusal';
    this.kind = kind;
    this.field = options.field ?? null;
    this.retryAfter = options.retryAfter ?? null;
  }
}

/** Headers the composer writes from the message itself: a custom one of these names is dropped. */
const STRUCTURAL = new Set(['from', 'to', 'cc', 'bcc', 'reply-to', 'subject', 'message-id', 'date', 'mime-version', 'content-type', 'content-transfer-encoding', 'content-disposition', 'received', 'return-path', 'sender']);

/** A value written as it is (printable ASCII on one line of a sane length); others are encoded by the composer. */
const PRINTABLE = /^[\x20-\x7e]{0,900}$/;
/** A header name (RFC 5322 ftext) and a value on one line. */
const HEADER_NAME = /^[\x21-\x39\x3b-\x7e]{1,76}$/;

export interface ProviderMailer {
  /** Composes `mail` into MIME and stores one copy per recipient (to, cc, bcc); resolves with the stored rows. */
  send(mail: ProviderMail, emulation: Emulation): Promise<StoredEmail[]>;
  /**
   * Stores a message the client composed itself (SES Raw, Mailgun's messages.mime), with a Received
   * trace put before it. `recipients`: the envelope the call names (SES Destinations, Mailgun's
   * `to`); null: the To and Cc of the message's own header.
   */
  sendRaw(raw: Buffer, recipients: string[] | null, emulation: Emulation): Promise<StoredEmail[]>;
  /** Checks the sender and every recipient (served domains) without storing; throws the refusal. */
  check(mail: ProviderMail): string[];
  /** Parses an address list as a provider gives it ("Name <a@b>, c@d"); throws `invalid` naming `field`. */
  addresses(value: string | string[] | undefined | null, field: string): MailAddress[];
}

export function createProviderMailer(core: Core): ProviderMailer {
  const { config } = core;
  // the stream transport: MailComposer's output into a buffer (no socket, no file or URL read);
  // nodemailer is loaded by the first provider call, not at start (docs/architecture.md "Memory")
  let transport: Promise<Transporter> | null = null;
  const composer = {
    sendMail: async (options: SendMailOptions): Promise<{ message: unknown }> => {
      transport ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'windows', disableFileAccess: true, disableUrlAccess: true }));
      return (await transport).sendMail(options) as Promise<{ message: unknown }>;
    },
  };
  const receiver = createIngest(core); // the summary and where it is made, as for SMTP
  const ipCap = config.smtpCaps.perIpPerMinute ? { perMinute: config.smtpCaps.perIpPerMinute, perDay: Infinity } : null;
  const addressCap = config.smtpCaps.perAddressPerMinute ? { perMinute: config.smtpCaps.perAddressPerMinute, perDay: Infinity } : null;

  const addresses = (value: string | string[] | undefined | null, field: string): MailAddress[] => {
    if (value === undefined || value === null || value === '') return [];
    const list = Array.isArray(value) ? value : [value];
    const out: MailAddress[] = [];
    for (const item of list) {
      if (typeof item !== 'string') throw new ProviderRefusal('invalid', `${field} must be an email address or a list of them`, { field });
      for (const a of addressParser(item, { flatten: true })) {
        if (!a.address || !a.address.includes('@')) throw new ProviderRefusal('invalid', `${field}: "${item.slice(0, 200)}" is not a valid email address`, { field });
        out.push(a.name ? { address: a.address, name: a.name } : { address: a.address });
      }
    }
    return out;
  };

  /** Every recipient at a domain this instance serves, normalised; else `recipient` naming the first that is not. */
  const served = (list: string[], field: string): string[] => {
    if (list.length === 0) throw new ProviderRefusal('invalid', 'The message has no recipient', { field });
    if (list.length > 100) throw new ProviderRefusal('invalid', `At most 100 recipients per message; ${list.length} given`, { field });
    const out: string[] = [];
    for (const raw of list) {
      const parsed = parseAddress(raw);
      if (!parsed) throw new ProviderRefusal('invalid', `The recipient "${raw.slice(0, 200)}" is not an address this service can name (local-part@domain)`, { field });
      let state;
      try {
        state = core.domains.stateOf(parsed.domain);
      } catch {
        throw new ProviderRefusal('unavailable', 'The served domains could not be read; try again later');
      }
      if (state !== 'active') {
        throw new ProviderRefusal('recipient', `The recipient ${parsed.address} is at ${parsed.domain}, a domain this ephemail does not receive mail for (it serves: ${core.domains.active().join(', ')}); nothing was sent`, { field });
      }
      out.push(parsed.address);
    }
    return [...new Set(out)];
  };

  const counted = async (bucket: string, cap: { perMinute: number; perDay: number }, message: (retry: number) => string) => {
    let r;
    try {
      r = await core.limiter.hit(bucket, cap, core.clock.now());
    } catch {
      throw new ProviderRefusal('unavailable', 'The limiter could not be reached; try again later');
    }
    if (!r.allowed) {
      core.metrics?.smtpCapped.inc({ cap: bucket.startsWith('smtp-ip:') ? 'ip' : 'address' });
      throw new ProviderRefusal('rate_limited', message(r.retryAfterSeconds), { retryAfter: r.retryAfterSeconds });
    }
  };

  const received = (emulation: Emulation) => {
    const ip = emulation.clientIp.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
    return `from [${ip}] by ${config.domains[0]} (ephemail, ${emulation.provider} API emulation) with HTTP id ${emulation.messageId}; ${new Date(core.clock.now()).toUTCString().replace('GMT', '+0000')}`;
  };

  /** Size, caps, summary, store: the path an SMTP message takes after its DATA. */
  const deliver = async (raw: Buffer, recipients: string[], mailedBy: string | null, emulation: Emulation): Promise<StoredEmail[]> => {
    if (raw.byteLength > config.maxMessageBytes) {
      throw new ProviderRefusal('too_large', `The message is ${raw.byteLength} bytes, over this service's limit of ${config.maxMessageBytes} bytes (EPHEMAIL_MAX_MESSAGE_BYTES)`);
    }
    if (ipCap) await counted(`smtp-ip:${ipBucket(emulation.clientIp)}`, ipCap, (retry) => `Too much mail from your address: at most ${ipCap.perMinute} messages a minute, try again in ${retry} s`);
    if (addressCap) {
      for (const a of recipients) await counted(`smtp-rcpt:${a}`, addressCap, (retry) => `${a} is receiving too much mail: at most ${addressCap.perMinute} messages a minute, try again in ${retry} s`);
    }
    // an unpooled buffer of its own: it may be handed (not copied) to a summary worker
    const own = Buffer.allocUnsafeSlow(raw.byteLength);
    raw.copy(own);
    let stored: StoredEmail[];
    try {
      stored = await receiver.receive(own, recipients, mailedBy);
    } catch (err) {
      core.log.error({ err }, 'provider API delivery failed; answered with a temporary error');
      throw new ProviderRefusal('unavailable', 'The message could not be stored; try again later');
    }
    core.log.info({ id: stored[0]?.id, recipients: stored.length, bytes: raw.byteLength, provider: emulation.provider, client: emulation.clientIp }, 'mail received through a provider API');
    return stored;
  };

  /** Template data as readable lines (keys' _ and - as spaces: "verification code: 482913"), nested keys joined by " / ". */
  const readable = (data: unknown, path: string[] = [], out: string[] = []): string[] => {
    if (out.length >= 500) return out;
    if (data !== null && typeof data === 'object') {
      for (const [k, v] of Object.entries(data as Record<string, unknown>)) readable(v, [...path, k.replace(/[_-]+/g, ' ')], out);
    } else {
      out.push(`${path.join(' / ') || 'value'}: ${String(data)}`);
    }
    return out;
  };
  const templateText = (template: { id: string; data: unknown }) =>
    `Template: ${template.id}\n(ephemail does not render provider templates: the template's id and data are kept as they were sent)\n\n${readable(template.data ?? {}).join('\n')}\n\nTemplate data (JSON):\n${JSON.stringify(template.data ?? {}, null, 2)}\n`;

  function check(mail: ProviderMail): string[] {
    if (!mail.from?.address || !parseAddress(mail.from.address)) throw new ProviderRefusal('invalid', `The sender "${String(mail.from?.address ?? '').slice(0, 200)}" is not a valid email address`, { field: 'from' });
    return served([...mail.to, ...mail.cc, ...mail.bcc].map((a) => a.address), 'to');
  }

  return {
    addresses,
    check,
    async send(mail, emulation) {
      const recipients = check(mail);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(mail.headers)) {
        if (!HEADER_NAME.test(name)) throw new ProviderRefusal('invalid', `"${name.slice(0, 80)}" is not a valid header name`, { field: 'headers' });
        if (STRUCTURAL.has(name.toLowerCase())) continue;
        headers[name] = String(value).replace(/[\r\n]+/g, ' ');
      }
      if (mail.template) headers['X-Ephemail-Template-Id'] = mail.template.id.replace(/[\r\n]+/g, ' ');
      const text = mail.template ? `${mail.text ? `${mail.text}\n\n` : ''}${templateText(mail.template)}` : mail.text;
      const messageId = emulation.messageId.includes('@') ? `<${emulation.messageId}>` : `<${emulation.messageId}@${config.domains[0]}>`;
      const info = await composer.sendMail({
        from: mail.from,
        to: mail.to,
        cc: mail.cc,
        // (no bcc: its recipients are delivered to, never named in the message)
        replyTo: mail.replyTo.length ? mail.replyTo : undefined,
        subject: mail.subject,
        text,
        html: mail.html,
        messageId,
        date: new Date(core.clock.now()),
        headers: [{ key: 'Received', value: received(emulation) }, ...Object.entries(headers).map(([key, value]) => ({ key, value: PRINTABLE.test(value) ? { prepared: true, value } : value }))],
        attachments: mail.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content, cid: a.cid, contentDisposition: a.cid ? 'inline' as const : 'attachment' as const })),
      });
      return deliver(info.message as Buffer, recipients, mailedByOf(mail.from.address), emulation);
    },
    async sendRaw(raw, given, emulation) {
      if (raw.byteLength === 0) throw new ProviderRefusal('invalid', 'The raw message is empty', { field: 'raw' });
      // the header block alone is read (the From domain, and the recipients when the call names none)
      const end = raw.indexOf('\r\n\r\n');
      const head = end >= 0 ? raw.subarray(0, end + 4) : raw.indexOf('\n\n') >= 0 ? raw.subarray(0, raw.indexOf('\n\n') + 2) : raw;
      const parsed = await PostalMime.parse(head).catch(() => null);
      if (!parsed) throw new ProviderRefusal('invalid', 'The raw message could not be read as MIME', { field: 'raw' });
      let list = given;
      if (list === null || list.length === 0) {
        const named = [...(parsed.to ?? []), ...(parsed.cc ?? []), ...(parsed.bcc ?? [])];
        list = named.flatMap((a) => ('group' in a && a.group ? a.group.map((g) => g.address ?? '') : [a.address ?? ''])).filter(Boolean);
      }
      const from = parsed.from && 'address' in parsed.from ? parsed.from.address ?? null : null;
      const recipients = served(list, 'destinations');
      // the trace in the message's own line ending (a bare-LF message stays bare-LF)
      const eol = raw.indexOf('\n') > 0 && raw[raw.indexOf('\n') - 1] !== 0x0d ? '\n' : '\r\n';
      const trace = Buffer.from(`Received: ${received(emulation)}${eol}`);
      return deliver(Buffer.concat([trace, raw]), recipients, mailedByOf(from), emulation);
    },
  };
}
