// Every view of a stored message, one entry each (docs/house-style.md "How to add a feature"): its name
// (the field of the email and of the stored views), its version, how it is derived, its fallback and
// its budget. A view is a domain rule plus one entry here; the derivation (views.ts), the service
// (services/views.ts), getEmail and the wire mappers read the entries, never a list of their own.
// Stages say where a view runs:
//   - `parse`: from the one parse of the message (message.ts), in the derivation's worker task and
//     within its budget (services/views.ts DERIVE_BUDGET, by size); `fallback` when no parser ran;
//   - `worker`: a task of its own on a derivation worker within its own budget, from an input the
//     parse gives (`prepare`); `fallback` when it runs out of time or fails;
//   - `service`: on the main thread (I/O that waits, never computes), over the raw message, within
//     its budget;
//   - `summary` and `verdicts`: made at ingest (the search text, with the summary) and after it (the
//     authentication verdicts, services/authentication.ts), each kept in a place of its own.
// Heavy rules (the HTML check's data, mailauth, spamd's client) are loaded where they run, on first use.
import { AUTHENTICATION_VIEW } from './authentication-view.ts';
import { extractCodes } from '../domain/extract/codes.ts';
import { extractLinks } from '../domain/extract/links.ts';
import { HTML_CHECK_BUDGET_MS, HTML_CHECK_MAX_CHARS, htmlCheckError } from '../domain/html-check.ts';
import type { MessageViews } from '../domain/message.ts';
import { checkSpam, SPAM_TIMEOUT_MS, type SpamdTarget } from './spamd.ts';
import type { ParsedMessage } from './message.ts';
import { normalizeContentType, roughText, safeFilename, toBytes } from './parts.ts';

/** The views kept in the stored views document, by name. */
export type StoredViews = Omit<MessageViews, 'version' | 'outcome' | 'versions'>;
export type StoredViewName = keyof StoredViews;

import type { Entry } from './entry.ts';
export type { Entry } from './entry.ts';

/** Read from the one parse (message.ts), in the derivation's task. */
export interface ParseView<K extends StoredViewName = StoredViewName> extends Entry<K> {
  stage: 'parse';
  derive(m: ParsedMessage): StoredViews[K];
  /** Its value when no parser ran within the budget (the body as received is all there is). */
  fallback(m: ParsedMessage): StoredViews[K];
}

/** A worker task of its own, with its own budget. */
export interface WorkerView<K extends StoredViewName = StoredViewName> extends Entry<K> {
  stage: 'worker';
  /** In the parse: the input of its task, or its value when there is nothing to run. */
  prepare(m: ParsedMessage): { input: string } | { value: StoredViews[K] };
  /** On a derivation worker; loads what it needs there. */
  derive(input: string): Promise<StoredViews[K]>;
  fallback(reason: 'over_budget' | 'failed', input: string): StoredViews[K];
}

/** What a `service` view may use: the service's own settings. */
export interface ServiceContext {
  spamd: SpamdTarget | null;
  /** A budget to use instead of the entry's (tests shorten them), by view name. */
  budgets?: Partial<Record<StoredViewName, number>>;
  /** The service's log (a view that could not be made says why). */
  warn(fields: Record<string, unknown>, msg: string): void;
}

/** On the main thread: I/O that waits (never computes), within its budget. */
export interface ServiceView<K extends StoredViewName = StoredViewName> extends Entry<K> {
  stage: 'service';
  /** Null: nothing to run here (not configured); the view is null. */
  derive(raw: Uint8Array, ctx: ServiceContext, budgetMs: number): Promise<StoredViews[K]> | null;
  fallback(): StoredViews[K];
  /**
   * Whether a kept value is a temporary failure worth asking for again (the service it asks was down
   * or slow): a later read asks again, in the background, backing off (services/views.ts).
   */
  askAgain?(value: StoredViews[K]): boolean;
}

export type StoredView = ParseView | WorkerView | ServiceView;

/** The search text (domain/search.ts): made with the summary at ingest; kept beside the message. */
export interface SummaryView extends Entry<'searchText'> {
  stage: 'summary';
  fallback(): string;
}

/** Bumped when the stored document itself changes shape; a view's own changes bump its `version`. */
export const VIEWS_VERSION = 4;

const parse = <K extends StoredViewName>(v: Omit<ParseView<K>, 'stage' | 'budget'>): ParseView<K> => ({ stage: 'parse', budget: null, ...v });

/**
 * The views of the stored document, in the order they are derived and shown (a view may read
 * only the message: none reads another).
 */
export const STORED_VIEWS: readonly StoredView[] = [
  parse({ name: 'to', version: 1, derive: (m) => m.header('to'), fallback: () => '' }),
  parse({ name: 'cc', version: 1, derive: (m) => m.header('cc'), fallback: () => '' }),
  parse({ name: 'messageId', version: 1, derive: (m) => m.header('message-id') || null, fallback: () => null }),
  parse({ name: 'headers', version: 1, derive: (m) => m.headers, fallback: () => [] }),
  parse({ name: 'textBody', version: 1, derive: (m) => m.textBody, fallback: (m) => m.textBody }),
  parse({ name: 'htmlBody', version: 1, derive: (m) => m.htmlBody, fallback: () => null }),
  parse({
    name: 'attachments',
    version: 1,
    derive: (m) => m.attachments.map((a, i) => {
      const contentType = normalizeContentType(a.mimeType);
      const cid = a.contentId ? a.contentId.trim().replace(/^<|>$/g, '').slice(0, 998) : '';
      return { id: String(i + 1), filename: safeFilename(a.filename, contentType, i), contentType, sizeBytes: toBytes(a.content).byteLength, contentId: cid || null };
    }),
    fallback: () => [],
  }),
  parse({ name: 'attachmentsDropped', version: 1, derive: (m) => m.attachmentsDropped, fallback: () => 0 }),
  parse({
    name: 'agentBody',
    version: 1,
    derive: (m) => ({ body: m.agent().body, truncated: m.agent().truncated }),
    fallback: (m) => ({ body: m.agent().body, truncated: m.agent().truncated }),
  }),
  parse({
    name: 'codes',
    version: 1,
    // the HTML as text: the agent's text when it came from the HTML, else one linear pass (a second
    // HTML→text conversion would cost as much as the sanitizer)
    derive: (m) => extractCodes({ subject: m.subject, text: m.textBody, htmlText: m.htmlBody === null ? null : m.agent().source === 'html' ? m.agent().body : roughText(m.htmlBody) }),
    fallback: () => [],
  }),
  parse({
    name: 'links',
    version: 1,
    derive: (m) => extractLinks({ html: m.htmlBody, text: m.textBody, listUnsubscribe: m.header('list-unsubscribe') || null }),
    fallback: () => [],
  }),
  {
    name: 'htmlCheck',
    stage: 'worker',
    version: 1,
    budget: HTML_CHECK_BUDGET_MS,
    // without the HTML (its budget ran out) there is nothing to check; without an HTML part, null
    prepare: (m) => (m.htmlSource !== null ? { input: m.htmlSource } : { value: m.hasHtml ? htmlCheckError('html_over_budget') : null }),
    derive: async (html) => (await import('../domain/html-check-run.ts')).checkHtml(html.slice(0, HTML_CHECK_MAX_CHARS), html.length > HTML_CHECK_MAX_CHARS),
    fallback: (reason, html) => htmlCheckError(reason, html.length > HTML_CHECK_MAX_CHARS),
  } satisfies WorkerView<'htmlCheck'>,
  {
    name: 'spam',
    stage: 'service',
    version: 1,
    budget: SPAM_TIMEOUT_MS,
    // spamd down or slow gives a SpamError (kept like a score); without EPHEMAIL_SPAMD, null
    derive: (raw, { spamd, warn }, budgetMs) => spamd && checkSpam(spamd, raw, budgetMs).then((verdict) => {
      if ('error' in verdict) warn({ spamd: `${spamd.host}:${spamd.port}`, error: verdict.error }, 'a spam score could not be made; the email reads spam.error');
      return verdict;
    }),
    fallback: () => ({ error: 'spamd timed out' }),
    // spamd down, slow or failing: asked again when the email is read later (docs/sender-checks.md)
    askAgain: (spam) => spam != null && 'error' in spam,
  } satisfies ServiceView<'spam'>,
];

export const SEARCH_TEXT_VIEW: SummaryView = { name: 'searchText', stage: 'summary', version: 1, budget: null, fallback: () => '' };

export { AUTH_BUDGET, AUTHENTICATION_VIEW, type VerdictsView } from './authentication-view.ts';

/** Every view: those of the stored document, then those kept apart. */
export const VIEWS = [...STORED_VIEWS, SEARCH_TEXT_VIEW, AUTHENTICATION_VIEW] as const;

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
