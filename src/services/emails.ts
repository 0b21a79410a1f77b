// Listing, reading and deleting mail: the use cases behind the HTTP API, the tool endpoint and the web page.
import { parseAddress, type Address } from '../domain/address.ts';
import { AppError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { remembering } from '../domain/remember.ts';
import type { AttachmentMeta, EmailFull, MessageViews } from '../domain/message.ts';
import { AUTHENTICATION_VIEW, EMAIL_VIEWS, STORED_VIEWS } from '../derive/registry.ts';
import { FILTER_FIELDS, FILTER_MAX_CHARS, searchNeedle, type FilterField } from '../domain/search.ts';
import type { EmailSummary } from '../domain/summary.ts';
import type { Authentication } from './authentication.ts';
import type { ListQuery, StoredBytes, StoredEmail } from '../store/store.ts';
import type { Core } from './core.ts';
import type { Reader } from './views.ts';

/**
 * Resolves an inbox address from a path or tool argument: malformed → invalid_request (naming
 * `field`), a domain the service does not serve → not_found (docs/contract-decisions.md "Addresses in paths").
 */
export function resolveInbox(core: Pick<Core, 'domains'>, raw: string, parse: (raw: string) => Address | null = parseAddress): Address {
  const addr = parse(raw);
  if (!addr) {
    throw new AppError('invalid_request', `${JSON.stringify(raw.slice(0, 100))} is not a valid email address (expected local-part@domain)`, { field: 'address' });
  }
  // a retired domain's stored mail stays readable until it expires (docs/contract-decisions.md "Addresses in paths")
  if (core.domains.stateOf(addr.domain) === null) {
    throw new AppError('not_found', `${addr.domain} is not a domain of this service; active domains: ${core.domains.active().join(', ')}`);
  }
  return addr;
}

/**
 * Case-insensitive substrings of the decoded From, Subject and body text (FILTER_FIELDS); all given
 * must match. `text` is matched against the message's search text (domain/search.ts), made on the
 * first search that meets the message and kept; never against derived views.
 */
export type MailFilter = Partial<Record<FilterField, string>>;

/** A filtered read looks at most this many of an inbox's emails (newest or oldest first, from its cursor). */
export const FILTER_SCAN_MAX = 5000;
const SCAN_PAGE = 100;
/**
 * A body-text filter reads the search texts of at most this many emails per request, and per
 * wake-up of a held one (each at most SEARCH_TEXT_MAX_CHARS; those not made yet are made then): its
 * work is bounded, and it never derives views.
 */
export const TEXT_SCAN_MAX = 200;
/**
 * Search texts read per store call, growing from the first (a `latest` often matches at once); the
 * event loop turns between calls (25 texts: about 1 ms on SQLite, bench/search.ts).
 */
const TEXT_BATCH_FIRST = 8;
const TEXT_BATCH_MAX = 25;

/** Lets the event loop turn (other requests, /livez) between the store reads of one filtered read. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface ListInput extends MailFilter {
  address: string;
  limit: number;
  since?: string;
  before?: string;
  /** Seconds to hold when the result would be empty. */
  waitSeconds?: number;
  signal?: AbortSignal;
  /** Who searches (the search texts not made yet are made as theirs); absent: a list's, of one owner for all. */
  reader?: Reader;
}

export interface ListOutput {
  address: string;
  emails: EmailSummary[];
  waited: boolean;
}

interface Filter {
  /** From and Subject (on the summary), or null when neither is given. */
  head: ((e: EmailSummary) => boolean) | null;
  /** The body-text needle in search form, or null. */
  needle: string | null;
}

function checkFilter(filter: MailFilter): Filter | null {
  const heads: [FilterField, string][] = [];
  let needle: string | null = null;
  for (const field of FILTER_FIELDS) {
    const v = filter[field];
    if (v === undefined || v === '') continue;
    if (v.length > FILTER_MAX_CHARS) throw new AppError('invalid_request', `is at most ${FILTER_MAX_CHARS} characters`, { field });
    if (field === 'text') needle = searchNeedle(v);
    else heads.push([field, v.toLowerCase()]);
  }
  if (heads.length === 0 && needle === null) return null;
  const head = heads.length === 0 ? null : (e: EmailSummary) => heads.every(([field, n]) => (field === 'from' ? e.sender : e.subject).toLowerCase().includes(n));
  return { head, needle };
}

/** The filter as part of a wait's sharing key. */
const filterKey = (filter: MailFilter) => FILTER_FIELDS.map((f) => filter[f] ?? '').join('\u0000');

function checkCursors(input: { since?: string; before?: string }): void {
  if (input.since !== undefined && input.before !== undefined) {
    throw new AppError('invalid_request', 'since and before cannot be used together: since reads newer mail oldest-first, before pages into older mail');
  }
  for (const field of ['since', 'before'] as const) {
    const v = input[field];
    if (v !== undefined && !isUuid(v)) throw new AppError('invalid_request', `must be an email id (a UUID), got ${JSON.stringify(v.slice(0, 60))}`, { field });
  }
}

/**
 * Whether the search text of an email whose message has none yet contains `needle`: the text is made
 * now (on a derivation worker, as `reader`'s, services/views.ts) and kept; null when the email is gone.
 */
async function madeTextHit(core: Core, id: string, needle: string, reader?: Reader): Promise<boolean | null> {
  const row = await core.store.getEmail(id, core.clock.now());
  const text = row && (await core.views.searchText(row.messageKey, reader));
  return text === null ? null : text.includes(needle);
}

/**
 * Which of `ids` have a search text containing `needle` (true/false; null: the email is gone), as
 * the store matches them; a message with no search text yet (none is made at ingest) gets it made
 * now, as `reader`'s, then matched. The list, `latest` and IMAP's SEARCH BODY/TEXT all ask this.
 */
export async function matchTexts(core: Core, ids: readonly string[], needle: string, now: number, reader?: Reader): Promise<(boolean | null)[]> {
  const hits = await core.store.matchText([...ids], needle, now);
  if (hits.includes(null)) {
    await Promise.all(ids.map(async (id, j) => {
      if (hits[j] === null) hits[j] = await madeTextHit(core, id, needle, reader);
    }));
  }
  return hits;
}

/**
 * One page of an inbox, as the store lists it, keeping only emails that match: reads the store's
 * pages from the cursor on until `limit` match or FILTER_SCAN_MAX emails were looked at (newest
 * first: or until an id at or below `stopAt`); with a body-text filter, also until the search texts
 * of TEXT_SCAN_MAX emails were read (those not made yet are made first, as `reader`'s). The event
 * loop turns between store reads.
 */
async function filteredPage(core: Core, address: string, query: ListQuery, filter: Filter, stopAt?: string, reader?: Reader): Promise<EmailSummary[]> {
  const out: EmailSummary[] = [];
  const { needle } = filter;
  let { since, before } = query;
  let textLeft = TEXT_SCAN_MAX;
  let batch = TEXT_BATCH_FIRST;
  for (let seen = 0; seen < FILTER_SCAN_MAX; seen += SCAN_PAGE) {
    const now = core.clock.now();
    const page = await core.store.listEmails(address, { limit: SCAN_PAGE, since, before }, now);
    let end = page.length;
    if (stopAt !== undefined) {
      end = page.findIndex((e) => e.id <= stopAt); // newest first: nothing newer than the stop is left
      if (end < 0) end = page.length;
    }
    const candidates = filter.head ? page.slice(0, end).filter(filter.head) : page.slice(0, end);
    if (needle === null) {
      for (const e of candidates) {
        out.push(e);
        if (out.length >= query.limit) return out;
      }
    } else {
      for (let i = 0; i < candidates.length && textLeft > 0;) {
        const part = candidates.slice(i, i + Math.min(batch, textLeft));
        i += part.length;
        textLeft -= part.length;
        batch = Math.min(TEXT_BATCH_MAX, batch * 2);
        const hits = await matchTexts(core, part.map((e) => e.id), needle, now, reader);
        for (let j = 0; j < part.length; j++) {
          if (hits[j] !== true) continue;
          out.push(part[j]);
          if (out.length >= query.limit) return out;
        }
        await turn();
      }
      if (textLeft <= 0) return out;
    }
    if (end < page.length || page.length < SCAN_PAGE) break;
    if (since !== undefined) since = page.at(-1)!.id;
    else before = page.at(-1)!.id;
    await turn();
  }
  return out;
}

/**
 * A list's input checked (its inbox, cursors and filter, in that order) and its store query: the one
 * check of a list. listEmails and listEmailsNow make it; an edge that holds the read makes it first
 * (a bad input fails before taking a wait slot) and passes it on.
 */
export function checkList(core: Pick<Core, 'domains'>, input: ListInput, parse?: (raw: string) => Address | null) {
  const { address } = resolveInbox(core, input.address, parse);
  checkCursors(input);
  const match = checkFilter(input);
  return { address, match, query: { limit: input.limit, since: input.since?.toLowerCase(), before: input.before?.toLowerCase() } };
}
export type CheckedList = ReturnType<typeof checkList>;

/** `checked`: checkList of this input, when the caller made it already. */
export async function listEmails(core: Core, input: ListInput, checked: CheckedList = checkList(core, input)): Promise<ListOutput> {
  const { address, match, query } = checked;
  const run = match ? () => filteredPage(core, address, query, match, undefined, input.reader) : () => core.store.listEmails(address, query, core.clock.now());
  const ms = (input.waitSeconds ?? 0) * 1000;
  // nothing to hold: what hold() would do, without its promise
  if (ms <= 0) return { address, emails: await run(), waited: false };
  // waits on this address with the same page (and filter) share their re-query after a delivery
  const key = `${query.limit}:${query.since ?? ''}:${query.before ?? ''}${match ? `:${filterKey(input)}` : ''}`;
  const { result, waited } = await core.waits.hold(address, ms, run, input.signal, key);
  return { address, emails: result, waited };
}

/**
 * listEmails answered at once when nothing is to be held or filtered and the store holds the page in
 * memory now (the read cache), else undefined (ask listEmails): a poll of a page read before takes
 * no promise turn. The same checks as listEmails (checkList).
 */
export function listEmailsNow(core: Core, input: ListInput, parse?: (raw: string) => Address | null): ListOutput | undefined {
  if ((input.waitSeconds ?? 0) > 0 || !core.store.peekList) return undefined;
  const { address, match, query } = checkList(core, input, parse);
  if (match) return undefined;
  const emails = core.store.peekList(address, query, core.clock.now());
  return emails && { address, emails, waited: false };
}

/**
 * The views `latest` filters on (derive/registry.ts `wire.filter`): a query parameter each, named by
 * the view's field; the email's value must equal the one asked for, case-insensitively.
 */
export const VIEW_FILTERS = EMAIL_VIEWS.filter((v) => v.wire?.filter !== undefined).map((v) => ({ name: v.name, field: v.wire!.field, description: v.wire!.filter! }));
/**
 * A view filter reads the views of at most this many of the nearest emails that match the other
 * filters, per request and per wake-up of a held one (deriving those not derived yet, as the caller's).
 */
export const VIEW_SCAN_MAX = 20;

export interface LatestInput extends MailFilter {
  /** View filters by view name (VIEW_FILTERS); empty values are ignored. */
  views?: Partial<Record<string, string>>;
  address: string;
  /** Only mail newer than this id (any UUIDv7: one made from the current time means "from now on"). */
  since?: string;
  waitSeconds?: number;
  signal?: AbortSignal;
  /** Who reads the email found (its views are derived as theirs). */
  reader?: Reader;
}

/** A latest's input checked (its inbox, cursor and filter): the one check, made first by an edge that holds the read. */
export function checkLatest(core: Pick<Core, 'domains'>, input: LatestInput) {
  const { address } = resolveInbox(core, input.address);
  checkCursors(input);
  const match = checkFilter(input) ?? { head: null, needle: null };
  const views: [string, string][] = [];
  for (const f of VIEW_FILTERS) {
    const v = input.views?.[f.name];
    if (v === undefined || v === '') continue;
    if (v.length > FILTER_MAX_CHARS) throw new AppError('invalid_request', `${f.field} is at most ${FILTER_MAX_CHARS} characters`);
    views.push([f.name, v.toLowerCase()]);
  }
  return { address, match, views, since: input.since?.toLowerCase() };
}
export type CheckedLatest = ReturnType<typeof checkLatest>;

/** The newest email that matches, in full, or null (none yet, or the wait ran out). `checked`: checkLatest of this input, when made already. */
export async function latestEmail(core: Core, input: LatestInput, checked: CheckedLatest = checkLatest(core, input)): Promise<{ address: string; email: EmailFull | null; waited: boolean }> {
  const { address, match, views: wanted, since } = checked;
  const newest = async () => {
    if (wanted.length === 0) {
      const [e] = await filteredPage(core, address, { limit: 1 }, match, since, input.reader);
      return e ? [e] : [];
    }
    // the nearest that match the other filters, newest first: the first whose views match too
    for (const e of await filteredPage(core, address, { limit: VIEW_SCAN_MAX }, match, since, input.reader)) {
      const views = await rowAndViews(core, e.id, input.reader).then((r) => r.views as unknown as Record<string, unknown>, () => null);
      if (views && wanted.every(([name, want]) => typeof views[name] === 'string' && (views[name] as string).toLowerCase() === want)) return [e];
    }
    return [];
  };
  const ms = (input.waitSeconds ?? 0) * 1000;
  const viewKey = wanted.map(([n, v]) => `${n}=${v}`).join('\u0000');
  const { result, waited } = ms > 0
    ? await core.waits.hold(address, ms, newest, input.signal, `latest:${since ?? ''}:${filterKey(input)}:${viewKey}`)
    : { result: await newest(), waited: false };
  if (result.length === 0) return { address, email: null, waited };
  try {
    return { address, email: await getEmail(core, result[0].id, input.reader), waited };
  } catch (err) {
    if (err instanceof AppError && err.type === 'not_found') return { address, email: null, waited }; // deleted meanwhile
    throw err;
  }
}

const notFound = (id: string) =>
  new AppError('not_found', `No email with id ${JSON.stringify(id.slice(0, 60))}: it never existed, was deleted, or expired (emails are deleted about one hour after arrival)`);

/** One email's row and derived views, without its verdicts (what a list's previews read); not_found when gone. */
export async function rowAndViews(core: Core, id: string, reader?: Reader) {
  const row = isUuid(id) ? await core.store.getEmail(id.toLowerCase(), core.clock.now()) : null;
  const views = row && (await core.views.get(row.messageKey, reader));
  if (!row || !views) throw notFound(id);
  return { row, views };
}

/**
 * One email in full: its row, then every view of the registry (derive/registry.ts) by name, the
 * verdicts kept apart last; its views are derived on its first read, queued as `reader`'s (views.ts).
 */
export async function getEmail(core: Core, id: string, reader?: Reader): Promise<EmailFull> {
  const { row: r, views: v } = await rowAndViews(core, id, reader);
  return fullEmail(r, v, await core.authentication.get(r.messageKey, r.receivedAt));
}

/** A face's rendering of an email in full, kept by the read model under the face's name (answers.ts). */
export interface EmailFace {
  readonly name: string;
  render(email: EmailFull): Buffer;
}

/**
 * One email in full as `face` renders it: from the read model when it holds the final answer of the
 * stored message, else read (and derived when new) and rendered, and kept once final. The row is
 * read on every call unless the store's deletions count says it cannot have changed (answers.ts:
 * the one staleness rule).
 */
export async function emailAnswer(core: Core, id: string, face: EmailFace, reader?: Reader): Promise<Buffer> {
  if (!isUuid(id)) throw notFound(id);
  const lower = id.toLowerCase();
  const now = core.clock.now();
  // (read before the row: a delete after it raises the count, so the next read reads the row again)
  const checked = core.store.deletions?.();
  if (checked !== undefined) {
    const fresh = core.answers.fresh(face.name, lower, checked, now);
    if (fresh) return fresh;
  }
  const row = await core.store.getEmail(lower, now);
  if (!row) throw notFound(id);
  const kept = core.answers.get(face.name, row.id, row.messageKey, checked);
  if (kept) return kept;
  const views = await core.views.get(row.messageKey, reader);
  if (!views) throw notFound(id);
  const verdicts = await core.authentication.get(row.messageKey, row.receivedAt);
  const answer = face.render(fullEmail(row, views, verdicts));
  if (verdicts && core.views.isFinal(views)) core.answers.put(face.name, row.id, row.messageKey, row.expiresAt, answer, checked);
  return answer;
}

/**
 * parseAddress, remembering its answers for up to `max` strings (then starting over): a poller
 * sends the same address again and again, and parsing one (NFC, three patterns) costs more than
 * the rest of a repeated list. A reader of many requests (a route) keeps one.
 */
export const addressParser = (max = 1024): ((raw: string) => Address | null) =>
  // (frozen: handed to every request that sends the same string)
  remembering((raw) => {
    const addr = parseAddress(raw);
    return addr && Object.freeze(addr);
  }, max);

function fullEmail(r: StoredEmail, v: MessageViews, authentication: Authentication | null): EmailFull {
  // the row's fields, then the views in the registry's order: one object of a fixed shape per read
  const email: Record<string, unknown> = {
    id: r.id, address: r.address, sender: r.sender, mailedBy: r.mailedBy, subject: r.subject,
    hasAttachments: r.hasAttachments, receivedAt: r.receivedAt, expiresAt: r.expiresAt,
  };
  const doc = v as unknown as Record<string, unknown>;
  for (const view of STORED_VIEWS) email[view.name] = doc[view.name] ?? null;
  email[AUTHENTICATION_VIEW.name] = authentication;
  return email as unknown as EmailFull;
}

/** The message as received (oversized parts cut out), for `/raw`. */
export async function getRaw(core: Core, id: string): Promise<{ id: string; raw: StoredBytes }> {
  const row = isUuid(id) ? await core.store.getEmail(id.toLowerCase(), core.clock.now()) : null;
  const raw = row && (await core.store.readRaw(row.messageKey));
  if (!row || !raw) throw notFound(id);
  return { id: row.id, raw };
}

export async function deleteEmail(core: Core, id: string): Promise<void> {
  const ok = isUuid(id) && (await core.store.deleteEmail(id.toLowerCase(), core.clock.now()));
  if (ok) core.answers.forgetEmail(id.toLowerCase());
  if (!ok) throw notFound(id);
}

export async function purgeInbox(core: Core, rawAddress: string): Promise<{ address: string; deleted: number }> {
  const { address } = resolveInbox(core, rawAddress);
  return { address, deleted: await core.store.purgeInbox(address, core.clock.now()) };
}

export async function listAttachments(core: Core, emailId: string, reader?: Reader): Promise<AttachmentMeta[]> {
  return (await rowAndViews(core, emailId, reader)).views.attachments;
}

export interface AttachmentContent {
  meta: AttachmentMeta;
  chunks: AsyncIterable<Uint8Array>;
}

export async function getAttachment(core: Core, emailId: string, attachmentId: string, reader?: Reader): Promise<AttachmentContent> {
  const { row, views } = await rowAndViews(core, emailId, reader);
  const index = views.attachments.findIndex((a) => a.id === attachmentId);
  if (index >= 0) await core.views.stored(row.messageKey); // parts of views derived just now
  const bytes = index >= 0 ? await core.store.readPart(row.messageKey, index) : null;
  if (index < 0 || !bytes) {
    if (index >= 0) throw notFound(emailId); // freed meanwhile
    throw new AppError('not_found', `Email ${emailId} has no attachment ${JSON.stringify(attachmentId.slice(0, 60))}`, { hint: { kind: 'list_attachments', emailId } });
  }
  return { meta: views.attachments[index], chunks: bytes.chunks };
}

/** What the URL builders need: the service's `{base_url}`. */
type Base = Pick<Core, 'baseUrl'>;

/** `{base_url}/api/v1/emails/{id}` */
export const emailUrl = (core: Base, emailId: string) => `${core.baseUrl()}/api/v1/emails/${emailId}`;

/** `{base_url}/api/v1/emails/{id}/attachments/{attachment_id}` */
export const downloadUrl = (core: Base, emailId: string, attachmentId: string) => `${emailUrl(core, emailId)}/attachments/${encodeURIComponent(attachmentId)}`;

/** `{base_url}/api/v1/emails/{id}/raw` */
export const rawUrl = (core: Base, emailId: string) => `${emailUrl(core, emailId)}/raw`;

/** `{base_url}/inbox/<address>` (docs/contract-decisions.md: web_url). */
export const webUrl = (core: Base, address: string) => `${core.baseUrl()}/inbox/${encodeURIComponent(address).replace(/%40/g, '@')}`;
