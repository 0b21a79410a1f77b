// Wire shapes of every /api/v1 resource (TypeBox): the same objects validate requests, serialize
// responses and generate /api/v1/openapi.json. One mapper per resource turns a service value into
// its snake_case wire form.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { iso } from '../../domain/clock.ts';
import { LINK_KINDS } from '../../domain/extract/links.ts';
import { ERROR_MEANING, ERROR_TYPES } from '../../domain/errors.ts';
import type { HtmlCheck } from '../../domain/html-check.ts';
import type { SpamVerdict } from '../../domain/spam.ts';
import type { AttachmentMeta, EmailFull } from '../../domain/message.ts';
import { EMAIL_VIEWS, type EmailViewName } from '../../derive/registry.ts';
import type { EmailSummary } from '../../domain/summary.ts';
import type { KeyRecord } from '../../store/keys.ts';
import type { Core } from '../../services/core.ts';
import { downloadUrl, emailUrl, rawUrl, webUrl } from '../../services/emails.ts';

const Nullable = <T extends TSchema>(t: T, description?: string) => Type.Union([t, Type.Null()], description ? { description } : {});
const DateTime = (description: string) => Type.String({ format: 'date-time', description });

export const LimitsSchema = Type.Object(
  {
    requests_per_minute: Type.Integer(),
    requests_per_day: Type.Integer(),
    concurrent_waits: Type.Integer({ description: '0 for anonymous callers (wait needs a key)' }),
  },
  { $id: 'Limits', title: 'Limits' },
);

export const InboxSchema = Type.Object(
  {
    address: Type.String({ description: 'Full address, <local_part>@<domain>' }),
    local_part: Type.String({ description: 'Part before the @, lowercase' }),
    domain: Type.String(),
    email_ttl_seconds: Type.Integer({ description: 'Lifetime of an email in seconds' }),
  },
  { $id: 'Inbox', title: 'Inbox' },
);

export const DomainSchema = Type.Object({ domain: Type.String({ description: 'A domain that currently accepts mail' }) }, { $id: 'Domain', title: 'Domain' });

const summaryFields = {
  id: Type.String({ description: 'UUIDv7; ids sort in arrival order' }),
  address: Type.String({ description: 'Inbox address that received the mail' }),
  sender: Type.String({ description: 'The From header as received (encoded words decoded); "" when absent. Forgeable: no SPF/DKIM check.' }),
  mailed_by: Nullable(Type.String(), 'Domain of the SMTP envelope sender (MAIL FROM), lowercased; null for the null sender <>'),
  subject: Type.String({ description: 'Subject, encoded words decoded; "" when absent' }),
  has_attachments: Type.Boolean(),
  received_at: DateTime('Arrival time'),
  expires_at: DateTime('When the email will be deleted'),
};

export const EmailSummarySchema = Type.Object(summaryFields, { $id: 'EmailSummary', title: 'EmailSummary' });

export const AttachmentSchema = Type.Object(
  {
    id: Type.String({ description: 'Unique within its email' }),
    filename: Type.String({ description: 'Safe file name (no path parts or control characters)' }),
    content_type: Type.String(),
    size_bytes: Type.Integer(),
    download_url: Type.String({ description: 'Address of the raw-bytes endpoint for this attachment' }),
    content_id: Nullable(Type.String(), 'The part\'s Content-ID without angle brackets (what `cid:` URLs in the HTML name); null when absent. Additive.'),
  },
  { $id: 'Attachment', title: 'Attachment' },
);

export const CodeSchema = Type.Object(
  {
    value: Type.String({ description: 'Exactly what a user types: digit grouping removed ("559 120" → "559120"); alphanumeric codes as shown', examples: ['559120'] }),
    context: Type.String({ description: 'A short snippet around the code' }),
  },
  { $id: 'Code', title: 'Code' },
);

export const LinkSchema = Type.Object(
  {
    url: Type.String({ description: 'The href as written (entities decoded)' }),
    text: Type.String({ description: 'The link text (or image alt text), on one line' }),
    kind: Type.Union(LINK_KINDS.map((k) => Type.Literal(k)), { description: 'What the link is for' }),
    destination: Nullable(Type.String(), 'The real target when a click-tracking redirect carries it in its own URL (AWS SES awstrack.me, ?url=, ?redirect=, ?u=); null otherwise'),
  },
  { $id: 'Link', title: 'Link' },
);

export const HtmlCheckSchema = Type.Object(
  {
    supported_percent: Type.Number({ description: 'Share of the (feature found × client checked) pairs that are supported, in percent, as Mailpit totals it (over the features listed)' }),
    partial_percent: Type.Number({ description: 'Share of those pairs only partly supported' }),
    unsupported_percent: Type.Number({ description: 'Share of those pairs not supported' }),
    features: Type.Array(
      Type.Object({
        feature: Type.String({ description: 'caniemail.com title, e.g. `<style> element`, `display:flex`', examples: ['display:flex'] }),
        url: Nullable(Type.String(), 'Its caniemail.com page'),
        clients: Type.Array(Type.Object({
          client: Type.String({ description: 'caniemail id, `family.platform`', examples: ['outlook.windows'] }),
          name: Type.String({ examples: ['Outlook Windows'] }),
          support: Type.Union([Type.Literal('none'), Type.Literal('partial')]),
          notes: Type.Array(Type.String(), { description: 'caniemail.com notes (at most 2, each at most 200 characters)' }),
        }), { description: 'The checked clients that do not, or only partly, support it' }),
      }),
      { description: 'Features the HTML uses that at least one checked client does not fully support, most clients affected first (at most 100)' },
    ),
    clients_checked: Type.Array(Type.String(), { description: 'Gmail, Outlook (desktop, web, mobile), Apple Mail and Yahoo platforms, as caniemail ids' }),
    truncated: Type.Boolean({ description: 'Not all of the HTML was checked: only its first 131,072 characters, or its CSS cut to a bounded size (16,384 characters and 400 rules of <style>, 32,768 characters of style attributes)' }),
    error: Nullable(Type.String(), 'Why there is no result: `over_budget` (the check ran out of time), `html_over_budget` (the HTML itself was not derived), `failed`; null when checked'),
  },
  { $id: 'HtmlCheck', title: 'HtmlCheck', description: 'HTML compatibility from the caniemail.com data (docs/sender-checks.md)' },
);

export const SpamSchema = Type.Union(
  [
    Type.Object({
      score: Type.Number({ description: 'SpamAssassin\'s score', examples: [2.3] }),
      threshold: Type.Number({ description: 'The score from which spamd calls it spam (its required_score)', examples: [5] }),
      is_spam: Type.Boolean(),
      rules: Type.Array(Type.Object({ name: Type.String({ examples: ['MISSING_DATE'] }), score: Type.Number(), description: Type.String() }), { description: 'The rules that hit, in spamd\'s order' }),
      truncated: Type.Boolean({ description: 'Only the first 512 KiB of the message were sent to spamd' }),
    }),
    Type.Object({
      error: Type.String({ description: '`spamd unreachable`, `spamd timed out`, or `spamd error: …`; kept with the email like a score (docs/sender-checks.md)', examples: ['spamd unreachable'] }),
    }),
  ],
  { $id: 'Spam', title: 'Spam', description: 'SpamAssassin\'s verdict from the configured spamd (EPHEMAIL_SPAMD), or why there is none' },
);

export const HeaderSchema = Type.Object({ name: Type.String(), value: Type.String() }, { $id: 'Header', title: 'Header' });

const AuthResultSchema = Type.Union(['pass', 'fail', 'softfail', 'neutral', 'none', 'temperror', 'permerror', 'policy'].map((r) => Type.Literal(r)), { description: 'An RFC 8601 result word' });

export const AuthenticationSchema = Type.Object(
  {
    spf: Type.Object({
      result: AuthResultSchema,
      domain: Nullable(Type.String(), 'The MAIL FROM domain (the HELO name for the null sender)'),
    }),
    dkim: Type.Array(Type.Object({
      result: AuthResultSchema,
      domain: Type.String({ description: 'The signing domain (d=)' }),
      selector: Type.String({ description: 'The selector (s=)' }),
      aligned: Type.Boolean({ description: 'Whether the signing domain aligns with the From domain (DMARC)' }),
      comment: Type.Optional(Type.String({ description: 'Why, when not pass (e.g. "body hash did not verify": the body changed after signing)' })),
    }), { description: 'One entry per signature; [] when unsigned' }),
    dmarc: Type.Object({
      result: AuthResultSchema,
      domain: Nullable(Type.String(), 'The From domain; null when the message has no single From domain'),
      policy: Nullable(Type.String(), 'The record\'s p= (none, quarantine, reject); null without a record'),
    }),
    arc: Type.Object({ result: AuthResultSchema }),
    header: Type.String({ description: 'The value of an Authentication-Results header for this message (RFC 8601)' }),
  },
  { $id: 'Authentication', title: 'Authentication', description: 'SPF, DKIM, DMARC and ARC verdicts, computed once shortly after arrival (docs/authentication.md)' },
);

/** One field of the full email past the summary: its wire name, schema and value. */
interface WireField {
  field: string;
  schema: TSchema;
  value(e: EmailFull, core: Core): unknown;
}

/**
 * How the API writes a view that it does not write as kept (derive/registry.ts: which views it
 * shows, their fields and schemas, are the entries'): by view name. A view without a shape here is
 * written as kept.
 */
const HTTP_SHAPES: { [K in EmailViewName]?: (v: EmailFull[K], e: EmailFull, core: Core) => unknown } = {
  attachments: (list, e, core) => list.map((a) => toWireAttachment(core, e.id, a)),
  spam: (s) => s && toWireSpam(s),
  htmlCheck: (c) => c && toWireHtmlCheck(c),
};

/** The one field that is no view: the raw message's address, after the view named here (its place since it was added). */
const RAW_URL = {
  after: 'attachmentsDropped' satisfies EmailViewName,
  field: { field: 'raw_url', schema: Type.String({ description: 'Address of the message as received (`GET /api/v1/emails/{id}/raw`, an .eml download). Additive.' }), value: (e, core) => rawUrl(core, e.id) } as WireField,
};

/** A view's field on the API, from its entry. */
function viewField(view: (typeof EMAIL_VIEWS)[number]): WireField[] {
  if (!view.wire?.faces.includes('http')) return [];
  const name = view.name;
  const shape = HTTP_SHAPES[name] as ((v: unknown, e: EmailFull, core: Core) => unknown) | undefined;
  const field: WireField = { field: view.wire.field, schema: Type.Unsafe(view.wire.schema), value: shape ? (e, core) => shape(e[name], e, core) : (e) => e[name] };
  return name === RAW_URL.after ? [field, RAW_URL.field] : [field];
}

/**
 * The full email's fields past the summary, in wire order: one per view of the registry that the
 * API shows (derive/registry.ts, `wire`), in the registry's order, and `raw_url`.
 */
export const EMAIL_FIELDS: readonly WireField[] = EMAIL_VIEWS.flatMap(viewField);

export const EmailFullSchema = Type.Object(
  { ...summaryFields, ...Object.fromEntries(EMAIL_FIELDS.map((f) => [f.field, f.schema])) },
  { $id: 'Email', title: 'Email' },
);

export const ApiKeySchema = Type.Object(
  {
    api_key: Type.String({ description: 'The raw key (eph_ + 40 base62 characters). Returned exactly once; cannot be recovered.' }),
    key_prefix: Type.String({ description: 'First 12 characters of the key, used to identify it' }),
    label: Type.String(),
    tier: Type.Literal('free'),
    limits: Type.Ref(LimitsSchema),
    created_at: DateTime('Creation time'),
    warning: Type.String(),
  },
  { $id: 'ApiKey', title: 'ApiKey' },
);

export const IdentitySchema = Type.Object(
  {
    kind: Type.Union([Type.Literal('anonymous'), Type.Literal('key')]),
    tier: Type.Union([Type.Literal('anonymous'), Type.Literal('free')]),
    key_prefix: Nullable(Type.String(), 'null for anonymous callers'),
    label: Nullable(Type.String(), 'null for anonymous callers'),
    limits: Type.Ref(LimitsSchema),
    usage: Type.Object({ requests_this_minute: Type.Integer(), requests_today: Type.Integer() }),
  },
  { $id: 'Identity', title: 'Identity' },
);

export const HealthSchema = Type.Object(
  {
    status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
    database: Type.Union([Type.Literal('connected'), Type.Literal('disconnected')]),
    smtp: Type.Union([Type.Literal('running'), Type.Literal('stopped')]),
  },
  { $id: 'Health', title: 'Health' },
);

export const ListMetaSchema = Type.Object(
  {
    address: Type.String(),
    count: Type.Integer({ description: 'Number of items returned' }),
    next_since: Nullable(Type.String(), 'Feed back as since on the next poll'),
    next_before: Nullable(Type.String(), 'Feed back as before to page into older mail'),
    waited: Type.Boolean({ description: 'True when the request was held by wait' }),
  },
  { $id: 'ListMeta', title: 'ListMeta' },
);

export const ErrorSchema = Type.Object(
  {
    error: Type.Object({
      type: Type.Union(ERROR_TYPES.map((t) => Type.Literal(t, { description: ERROR_MEANING[t] }))),
      message: Type.String({ description: 'Human-readable; may be reworded at any time' }),
      docs: Type.String({ description: 'Documentation address: {base_url}/docs#error-<type>' }),
    }),
  },
  { $id: 'Error', title: 'Error' },
);

export const SHARED_SCHEMAS = [LimitsSchema, InboxSchema, DomainSchema, EmailSummarySchema, AttachmentSchema, CodeSchema, LinkSchema, HtmlCheckSchema, SpamSchema, HeaderSchema, AuthenticationSchema, EmailFullSchema, ApiKeySchema, IdentitySchema, HealthSchema, ListMetaSchema, ErrorSchema];

export type WireSummary = Static<typeof EmailSummarySchema>;

const DAY_MS = 86_400_000;
const TWO = Array.from({ length: 100 }, (_, i) => (i < 10 ? '0' : '') + i);
const THREE = Array.from({ length: 1000 }, (_, i) => (i < 10 ? '00' : i < 100 ? '0' : '') + i);
/** Past the last millisecond of 9999: toISOString switches to the expanded ±YYYYYY form there. */
const LAST_FOUR_DIGIT_YEAR_MS = 253_402_300_800_000;

export { iso };

/**
 * A formatter with the output of `iso`, without a Date per call: it keeps the date part
 * (`YYYY-MM-DDT`) of the last two days it saw (its own state: each caller makes one), the time part
 * is table lookups. Anything outside 1970–9999 or not a whole millisecond goes to toISOString.
 */
export function createIsoFormatter(): (ms: number) => string {
  let dayA = NaN;
  let prefixA = '';
  let dayB = NaN;
  let prefixB = '';
  return (ms) => {
    if (!(ms >= 0 && ms < LAST_FOUR_DIGIT_YEAR_MS) || ms % 1 !== 0) return iso(ms);
    const day = Math.floor(ms / DAY_MS);
    let prefix: string;
    if (day === dayA) prefix = prefixA;
    else if (day === dayB) prefix = prefixB;
    else {
      prefix = iso(day * DAY_MS).slice(0, 11);
      dayB = dayA;
      prefixB = prefixA;
      dayA = day;
      prefixA = prefix;
    }
    let rem = ms - day * DAY_MS;
    const milli = rem % 1000;
    rem = (rem - milli) / 1000;
    const s = rem % 60;
    rem = (rem - s) / 60;
    const m = rem % 60;
    return `${prefix}${TWO[(rem - m) / 60]}:${TWO[m]}:${TWO[s]}.${THREE[milli]}Z`;
  };
}

/** The wire summary, with timestamps written by `format`. */
export const wireSummaryWith = (format: (ms: number) => string) => (e: EmailSummary): WireSummary => ({
  id: e.id,
  address: e.address,
  sender: e.sender,
  mailed_by: e.mailedBy,
  subject: e.subject,
  has_attachments: e.hasAttachments,
  received_at: format(e.receivedAt),
  expires_at: format(e.expiresAt),
});

export const toWireSummary = wireSummaryWith(iso);

/**
 * An email summary's JSON by `serialize` (the EmailSummary schema's serializer), kept per summary
 * object by the returned function (its own state: the list route makes one): the store hands out the
 * same objects while a page stays cached, so a page polled again costs a lookup per email instead of
 * a serialization. A kept text answers only while every field still has the value it was written
 * from; objects that are no longer used take theirs with them.
 */
export function createSummaryJson(serialize: (wire: WireSummary) => string): (e: EmailSummary) => string {
  const texts = new WeakMap<EmailSummary, EmailSummary & { json: string }>();
  const wire = wireSummaryWith(createIsoFormatter());
  return (e) => {
    const k = texts.get(e);
    if (
      k !== undefined && k.id === e.id && k.address === e.address && k.sender === e.sender && k.mailedBy === e.mailedBy &&
      k.subject === e.subject && k.hasAttachments === e.hasAttachments && k.receivedAt === e.receivedAt && k.expiresAt === e.expiresAt
    ) return k.json;
    const json = serialize(wire(e));
    texts.set(e, { ...e, json });
    return json;
  };
}

/**
 * The API's face of a full email (services/emails.ts emailAnswer): its 200 body `{ data: Email }` by
 * `serialize` (the route's serializer of that body), as UTF-8 bytes (a socket write of bytes skips
 * the encoding a string pays on every write). The read model keeps them (services/answers.ts).
 */
export const apiEmailFace = (serialize: (body: { data: unknown }) => string, core: Core) => ({
  name: 'api',
  render: (e: EmailFull) => Buffer.from(serialize({ data: toWireEmail(core, e) }), 'utf8'),
});

export const toWireAttachment = (core: Core, emailId: string, a: AttachmentMeta) => ({
  id: a.id,
  filename: a.filename,
  content_type: a.contentType,
  size_bytes: a.sizeBytes,
  download_url: downloadUrl(core, emailId, a.id),
  content_id: a.contentId,
});

/** The full email on the wire: the summary, then one field per row of EMAIL_WIRE. */
export const toWireEmail = (core: Core, e: EmailFull): WireSummary & Record<string, unknown> => {
  const out: WireSummary & Record<string, unknown> = toWireSummary(e);
  for (const f of EMAIL_FIELDS) out[f.field] = f.value(e, core);
  return out;
};

export const toWireSpam = (s: SpamVerdict) =>
  'error' in s ? { error: s.error } : { score: s.score, threshold: s.threshold, is_spam: s.isSpam, rules: s.rules, truncated: s.truncated };

export const toWireHtmlCheck = (c: HtmlCheck) => ({
  supported_percent: c.supportedPercent,
  partial_percent: c.partialPercent,
  unsupported_percent: c.unsupportedPercent,
  features: c.features,
  clients_checked: c.clientsChecked,
  truncated: c.truncated,
  error: c.error,
});

export const toWireLimits = (l: { perMinute: number; perDay: number }, concurrentWaits: number) => ({
  requests_per_minute: l.perMinute,
  requests_per_day: l.perDay,
  concurrent_waits: concurrentWaits,
});

export const toWireKey = (core: Core, apiKey: string, k: KeyRecord) => ({
  api_key: apiKey,
  key_prefix: k.prefix,
  label: k.label,
  tier: 'free' as const,
  limits: toWireLimits(core.config.key, core.config.key.concurrentWaits),
  created_at: iso(k.createdAt),
  warning: 'Store this key now: it is shown only once and cannot be recovered. Lost keys are replaced by creating a new one.',
});

/**
 * The body of a webhook call for a new email (Standard Webhooks shape): the list's summary plus the
 * links to the full email, its raw source and its inbox page.
 */
export const webhookEventJson = (core: Pick<Core, 'baseUrl'>, e: EmailSummary): string => JSON.stringify({
  type: 'email.received',
  timestamp: iso(e.receivedAt),
  data: { ...toWireSummary(e), url: emailUrl(core, e.id), raw_url: rawUrl(core, e.id), web_url: webUrl(core, e.address) },
});

