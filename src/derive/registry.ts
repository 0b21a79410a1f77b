// Every view of a stored message, one entry each (docs/house-style.md "How to add a feature"): its name
// (the field of the email and of the stored views), its version, how it is derived, its fallback, its
// budget, and how it is shown (`wire`: its field, the faces that show it, its schema, whether `latest`
// filters on it). A view is a domain rule plus one entry here: the types of the views (MessageViews,
// EmailFull) are inferred from the entries, and the derivation (views.ts), the service
// (services/views.ts), getEmail, the API's email JSON (http/schemas/wire.ts), read_email
// (mcp/tools/read-email.ts) and `latest`'s filters read the entries, never a list of their own.
// Stages say where a view runs:
//   - `parse`: from the one parse of the message (message.ts), in the derivation's worker task and
//     within its budget (services/views.ts DERIVE_BUDGET, by size); `fallback` when no parser ran;
//   - `worker`: a task of its own on a derivation worker within its own budget, from an input the
//     parse gives (`prepare`); `fallback` when it runs out of time or fails;
//   - `service`: on the main thread (I/O that waits, never computes), over the raw message, within
//     its budget;
//   - `summary` and `verdicts`: the search text, made on a worker on the first search that meets the
//     message (derive/search-text.ts), and the authentication verdicts, made after ingest
//     (services/authentication.ts), each kept in a place of its own.
// Heavy rules (the HTML check's data, mailauth, spamd's client) are loaded where they run, on first use.
// A registry other than STORED_VIEWS (tests add views) is named by its module (`defineRegistry`): the
// derivation's workers load that module and derive what it lists.
import { AUTHENTICATION_VIEW } from './authentication-view.ts';
import { extractCodes } from '../domain/extract/codes.ts';
import { extractLinks } from '../domain/extract/links.ts';
import { HTML_CHECK_BUDGET_MS, HTML_CHECK_MAX_CHARS, htmlCheckError, type HtmlCheck } from '../domain/html-check.ts';
import type { AttachmentMeta, HeaderField, MessageViews } from '../domain/message.ts';
import type { SpamVerdict } from '../domain/spam.ts';
import type { CodeCandidate } from '../domain/extract/codes.ts';
import type { EmailLink } from '../domain/extract/links.ts';
import type { RenderedBody } from '../domain/agent-body.ts';
import { LANGUAGE_BUDGET_MS, LANGUAGE_MAX_CHARS } from '../domain/language.ts';
import { checkSpam, SPAM_TIMEOUT_MS, type SpamdTarget } from './spamd.ts';
import type { ParsedMessage } from './message.ts';
import { normalizeContentType, safeFilename, toBytes } from './parts.ts';
import { nullable, type Entry } from './entry.ts';

export type { Entry, Face, Wire, WireSchema } from './entry.ts';

/** Read from the one parse (message.ts), in the derivation's task. */
export interface ParseView<K extends string = string, T = unknown> extends Entry<K> {
  stage: 'parse';
  derive(m: ParsedMessage): T;
  /** Its value when no parser ran within the budget (the body as received is all there is). */
  fallback(m: ParsedMessage): T;
}

/** A worker task of its own, with its own budget. */
export interface WorkerView<K extends string = string, T = unknown> extends Entry<K> {
  stage: 'worker';
  /** In the parse: the input of its task, or its value when there is nothing to run. */
  prepare(m: ParsedMessage): { input: string } | { value: T };
  /** On a derivation worker; loads what it needs there. */
  derive(input: string): Promise<T>;
  fallback(reason: 'over_budget' | 'failed', input: string): T;
}

/** What a `service` view may use: the service's own settings. */
export interface ServiceContext {
  spamd: SpamdTarget | null;
  /** A budget to use instead of the entry's (tests shorten them), by view name. */
  budgets?: Partial<Record<string, number>>;
  /** The service's log (a view that could not be made says why). */
  warn(fields: Record<string, unknown>, msg: string): void;
}

/** On the main thread: I/O that waits (never computes), within its budget. Its value is null when nothing ran. */
export interface ServiceView<K extends string = string, T = unknown> extends Entry<K> {
  stage: 'service';
  /** Null: nothing to run here (not configured); the view is null. */
  derive(raw: Uint8Array, ctx: ServiceContext, budgetMs: number): Promise<T> | null;
  fallback(): T;
  /**
   * Whether a kept value is a temporary failure worth asking for again (the service it asks was down
   * or slow): a later read asks again, in the background, backing off (services/views.ts).
   */
  askAgain?(value: T | null): boolean;
}

export type StoredView = ParseView | WorkerView | ServiceView;

/** The search text (domain/search.ts): made on a worker when first searched (derive/search-text.ts, ops.ts); kept beside the message. */
export interface SummaryView extends Entry<'searchText'> {
  stage: 'summary';
  fallback(): string;
}

/** Bumped when the stored document itself changes shape; a view's own changes bump its `version`. */
export const VIEWS_VERSION = 4;

// (the name apart, so that it is inferred as its literal: the views' types are keyed by it)
const parse = <K extends string, T>(v: { name: K } & Omit<ParseView<K, T>, 'stage' | 'budget' | 'name'>): ParseView<K, T> => ({ stage: 'parse', budget: null, ...v });
const worker = <K extends string, T>(v: { name: K } & Omit<WorkerView<K, T>, 'stage' | 'name'>): WorkerView<K, T> => ({ stage: 'worker', ...v });
const service = <K extends string, T>(v: { name: K } & Omit<ServiceView<K, T>, 'stage' | 'name'>): ServiceView<K, T> => ({ stage: 'service', ...v });

/** A view's value as kept and read: a `service` view's is null when nothing ran (no spamd). */
type ValueOf<E> = E extends { stage: 'service'; fallback(...a: never[]): infer T } ? T | null : E extends { fallback(...a: never[]): infer T } ? T : never;
/** The views of `registry` by name, each with the type of its value: what a stored document holds. */
export type ViewsOf<R extends readonly { name: string }[]> = { [E in R[number] as E['name']]: ValueOf<E> };

const ALL: readonly ('http' | 'mcp' | 'page')[] = ['http', 'mcp', 'page'];
const API_PAGE: readonly ('http' | 'page')[] = ['http', 'page'];
const str = (description: string) => ({ description, type: 'string' });
const list = (ref: string, description?: string) => ({ ...(description ? { description } : {}), type: 'array', items: { $ref: ref } });

/**
 * The views of the stored document, in the order they are derived and shown (a view may read
 * only the message: none reads another).
 */
export const STORED_VIEWS = [
  parse({ name: 'to', version: 1, derive: (m): string => m.header('to'), fallback: () => '', wire: { field: 'to', faces: API_PAGE, schema: str('To header, decoded ("" when absent)') } }),
  parse({ name: 'cc', version: 1, derive: (m): string => m.header('cc'), fallback: () => '', wire: { field: 'cc', faces: API_PAGE, schema: str('Cc header, decoded ("" when absent)') } }),
  parse({ name: 'messageId', version: 1, derive: (m): string | null => m.header('message-id') || null, fallback: () => null, wire: { field: 'message_id', faces: ['http'], schema: nullable({ type: 'string' }, 'Message-ID header') } }),
  parse({ name: 'headers', version: 1, derive: (m): HeaderField[] => m.headers, fallback: () => [], wire: { field: 'headers', faces: API_PAGE, schema: list('Header', 'Every header in the order received') } }),
  parse({ name: 'textBody', version: 1, derive: (m): string | null => m.textBody, fallback: (m) => m.textBody, wire: { field: 'text_body', faces: API_PAGE, schema: nullable({ type: 'string' }, 'Null when the message had no plain-text part') } }),
  parse({
    name: 'htmlBody', version: 1, derive: (m): string | null => m.htmlBody, fallback: () => null,
    wire: { field: 'html_body', faces: API_PAGE, schema: nullable({ type: 'string' }, 'Null when the message had no HTML part. Sanitized with an allow-list: no script, iframe, object, embed, form, svg, on* attributes or javascript: URLs.') },
  }),
  parse({
    name: 'attachments',
    version: 1,
    derive: (m): AttachmentMeta[] => m.attachments.map((a, i) => {
      const contentType = normalizeContentType(a.mimeType);
      const cid = a.contentId ? a.contentId.trim().replace(/^<|>$/g, '').slice(0, 998) : '';
      return { id: String(i + 1), filename: safeFilename(a.filename, contentType, i), contentType, sizeBytes: toBytes(a.content).byteLength, contentId: cid || null };
    }),
    fallback: () => [],
    wire: { field: 'attachments', faces: ALL, schema: list('Attachment') },
  }),
  parse({
    name: 'attachmentsDropped', version: 1, derive: (m): number => m.attachmentsDropped, fallback: () => 0,
    wire: { field: 'attachments_dropped', faces: ['http'], schema: { minimum: 0, description: 'Attachments not kept: over 5 MB decoded, or past the 100th. Additive.', type: 'integer' } },
  }),
  parse({
    name: 'agentBody',
    version: 1,
    derive: (m): Pick<RenderedBody, 'body' | 'truncated'> => ({ body: m.agent().body, truncated: m.agent().truncated }),
    fallback: (m) => ({ body: m.agent().body, truncated: m.agent().truncated }),
    // read_email's body (mcp/tools/read-email.ts writes it as `body` and `body_truncated`)
    wire: { field: 'body', faces: ['mcp'], schema: str('Plain text, at most 10,000 characters') },
  }),
  parse({
    name: 'codes',
    version: 1,
    // the HTML as text: the agent's text when it came from the HTML, else its words (domain/html.ts htmlWords)
    derive: (m): CodeCandidate[] => extractCodes({ subject: m.subject, text: m.textBody, htmlText: m.htmlBody === null ? null : m.agent().source === 'html' ? m.agent().body : m.htmlWords() }),
    fallback: () => [],
    wire: { field: 'codes', faces: ALL, schema: list('Code', 'Verification codes found in the subject, text and HTML, best first; [] when none (docs/extraction.md). Additive.') },
  }),
  parse({
    name: 'links',
    version: 1,
    derive: (m): EmailLink[] => extractLinks({ html: m.htmlBody, text: m.textBody, listUnsubscribe: m.header('list-unsubscribe') || null }),
    fallback: () => [],
    wire: { field: 'links', faces: ALL, schema: list('Link', 'Links, the main action first and unsubscribe last; List-Unsubscribe included; nothing is fetched (docs/extraction.md). Additive.') },
  }),
  service({
    name: 'spam',
    version: 1,
    budget: SPAM_TIMEOUT_MS,
    // spamd down or slow gives a SpamError (kept like a score); without EPHEMAIL_SPAMD, null
    derive: (raw, { spamd, warn }, budgetMs): Promise<SpamVerdict> | null => spamd && checkSpam(spamd, raw, budgetMs).then((verdict) => {
      if ('error' in verdict) warn({ spamd: `${spamd.host}:${spamd.port}`, error: verdict.error }, 'a spam score could not be made; the email reads spam.error');
      return verdict;
    }),
    fallback: () => ({ error: 'spamd timed out' }),
    // spamd down, slow or failing: asked again when the email is read later (docs/sender-checks.md)
    askAgain: (spam) => spam != null && 'error' in spam,
    wire: { field: 'spam', faces: API_PAGE, schema: nullable({ $ref: 'Spam' }, 'Spam score from SpamAssassin\'s spamd; null when EPHEMAIL_SPAMD is not set (or was not when the email was first read). Additive.') },
  }),
  worker({
    name: 'htmlCheck',
    version: 1,
    budget: HTML_CHECK_BUDGET_MS,
    // without the HTML (its budget ran out) there is nothing to check; without an HTML part, null
    prepare: (m): { input: string } | { value: HtmlCheck | null } => (m.htmlSource !== null ? { input: m.htmlSource } : { value: m.hasHtml ? htmlCheckError('html_over_budget') : null }),
    derive: async (html) => (await import('../domain/html-check-run.ts')).checkHtml(html.slice(0, HTML_CHECK_MAX_CHARS), html.length > HTML_CHECK_MAX_CHARS),
    fallback: (reason, html) => htmlCheckError(reason, html.length > HTML_CHECK_MAX_CHARS),
    wire: { field: 'html_check', faces: API_PAGE, schema: nullable({ $ref: 'HtmlCheck' }, 'HTML compatibility with major mail clients (caniemail.com data); null when the message has no HTML part. Additive.') },
  }),
  worker({
    name: 'language',
    version: 1,
    budget: LANGUAGE_BUDGET_MS,
    // the start of the text body, or of the HTML's text; without a body, null
    prepare: (m): { input: string } | { value: string | null } => {
      const text = m.textBody ?? (m.htmlBody === null ? null : m.agent().body);
      return text ? { input: text.slice(0, LANGUAGE_MAX_CHARS * 2) } : { value: null };
    },
    derive: async (text) => (await import('../domain/language.ts')).detectLanguage(text),
    fallback: () => null,
    wire: {
      field: 'language',
      faces: ALL,
      schema: nullable({ type: 'string' }, 'The body\'s language as a BCP 47 primary subtag: ISO 639-1 when the language has one (`fr`, `en`), else ISO 639-3; null when the body is too short or the language undetermined (franc-min, 82 languages; docs/extraction.md). Additive.'),
      filter: 'Only emails whose body is in this language (the `language` field, e.g. `fr`)',
    },
  }),
] as const;
// (checked against StoredView where it is used as one: a `satisfies` here would widen every name to string)

export type StoredViewName = (typeof STORED_VIEWS)[number]['name'];
/** The views kept in the stored views document, by name, each with its value's type (inferred from the entries). */
export type StoredViews = ViewsOf<typeof STORED_VIEWS>;

/**
 * A registry other than STORED_VIEWS, named by the module that exports it (`import.meta.url`) and
 * its export's name: the derivation's workers load it from there (functions do not cross to a worker).
 */
export function defineRegistry<R extends readonly StoredView[]>(module: string, name: string, views: R): R {
  return Object.defineProperty(views, REGISTRY_SOURCE, { value: { module, name }, enumerable: false }) as R;
}
/** Where a worker finds a registry: absent for STORED_VIEWS (the workers' own). */
export interface RegistrySource {
  module: string;
  name: string;
}
const REGISTRY_SOURCE = Symbol('registry source');
/** The source of `registry`: undefined for STORED_VIEWS; an error for a registry no worker could load. */
export function registrySource(registry: readonly StoredView[]): RegistrySource | undefined {
  const source = (registry as { [REGISTRY_SOURCE]?: RegistrySource })[REGISTRY_SOURCE];
  if (source) return source;
  // views of the main thread alone (`service`) need no worker of their own
  const shipped: readonly StoredView[] = STORED_VIEWS;
  if (registry.every((v) => v.stage === 'service' || shipped.includes(v))) return undefined;
  throw new Error('a registry with views of its own for the workers is made with defineRegistry (its workers load it by module)');
}
/** On a worker: the registry `source` names (STORED_VIEWS when none). */
export async function loadRegistry(source: RegistrySource | undefined): Promise<readonly StoredView[]> {
  if (!source) return STORED_VIEWS;
  const views = (await import(source.module))[source.name] as readonly StoredView[] | undefined;
  if (!Array.isArray(views)) throw new Error(`${source.module} exports no registry ${JSON.stringify(source.name)}`);
  return views;
}

export const SEARCH_TEXT_VIEW: SummaryView = { name: 'searchText', stage: 'summary', version: 1, budget: null, fallback: () => '', wire: null };

export { AUTH_BUDGET, AUTHENTICATION_VIEW, type VerdictsView } from './authentication-view.ts';

/** Every view: those of the stored document, then those kept apart. */
export const VIEWS = [...STORED_VIEWS, SEARCH_TEXT_VIEW, AUTHENTICATION_VIEW] as const;

/** The views of a full email (getEmail), in the order the faces show them: the stored ones, then the verdicts (null until computed). */
export const EMAIL_VIEWS = [...STORED_VIEWS, AUTHENTICATION_VIEW] as const;
export type EmailViewName = (typeof EMAIL_VIEWS)[number]['name'];
/** A full email's views by name, each with its value's type. */
export type EmailViews = StoredViews & { [AUTHENTICATION_VIEW.name]: ReturnType<typeof AUTHENTICATION_VIEW.fallback> | null };

// The domain's message model names no view: its types are these, inferred from the entries above.
declare module '../domain/message.ts' {
  interface StoredViewValues extends StoredViews {}
  interface EmailViewValues extends EmailViews {}
}

/** The version stamp of a stored document: only views past version 1 are named (older documents have none). */
export function versionsOf(registry: readonly StoredView[]): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  let any = false;
  for (const v of registry) {
    if (v.version === 1) continue;
    out[v.name] = v.version;
    any = true;
  }
  return any ? out : undefined;
}

/**
 * Whether a stored document holds every view of `registry` at its version: else it is derived
 * again from the raw message (so a new or changed view works on mail already stored).
 */
export function isCurrent(doc: Partial<MessageViews>, registry: readonly StoredView[]): boolean {
  if (doc.version !== VIEWS_VERSION) return false;
  for (const v of registry) if (!(v.name in doc) || (doc.versions?.[v.name] ?? 1) !== v.version) return false;
  return true;
}
