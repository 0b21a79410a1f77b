// Listing, reading and deleting mail: the use cases behind the HTTP API, the tool endpoint and the web page.
import { parseAddress, type Address } from '../domain/address.ts';
import { AppError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import type { AttachmentMeta, EmailFull } from '../domain/message.ts';
import type { EmailSummary, StoredBytes } from '../store/store.ts';
import type { Core } from './core.ts';

/**
 * Resolves an inbox address from a path or tool argument: malformed → invalid_request (naming
 * `field`), a domain the service does not serve → not_found (DECISIONS.md "Addresses in paths").
 */
export function resolveInbox(core: Core, raw: string, field = 'address'): Address {
  const addr = parseAddress(raw);
  if (!addr) {
    throw new AppError('invalid_request', `${field} ${JSON.stringify(raw.slice(0, 100))} is not a valid email address (expected local-part@domain)`);
  }
  if (!core.config.domains.includes(addr.domain)) {
    throw new AppError('not_found', `${addr.domain} is not a domain of this service; active domains: ${core.config.domains.join(', ')}`);
  }
  return addr;
}

export interface ListInput {
  address: string;
  limit: number;
  since?: string;
  before?: string;
  /** Seconds to hold when the result would be empty. */
  waitSeconds?: number;
  signal?: AbortSignal;
}

export interface ListOutput {
  address: string;
  emails: EmailSummary[];
  waited: boolean;
}

export async function listEmails(core: Core, input: ListInput): Promise<ListOutput> {
  const { address } = resolveInbox(core, input.address);
  if (input.since !== undefined && input.before !== undefined) {
    throw new AppError('invalid_request', 'since and before cannot be used together: since reads newer mail oldest-first, before pages into older mail');
  }
  for (const field of ['since', 'before'] as const) {
    const v = input[field];
    if (v !== undefined && !isUuid(v)) throw new AppError('invalid_request', `${field} must be an email id (a UUID), got ${JSON.stringify(v.slice(0, 60))}`);
  }
  const query = { limit: input.limit, since: input.since?.toLowerCase(), before: input.before?.toLowerCase() };
  const run = () => core.store.listEmails(address, query, core.clock.now());
  const ms = (input.waitSeconds ?? 0) * 1000;
  // nothing to hold: what hold() would do, without its promise
  if (ms <= 0) return { address, emails: await run(), waited: false };
  // waits on this address with the same page share their re-query after a delivery
  const { result, waited } = await core.waits.hold(address, ms, run, input.signal, `${query.limit}:${query.since ?? ''}:${query.before ?? ''}`);
  return { address, emails: result, waited };
}

const notFound = (id: string) =>
  new AppError('not_found', `No email with id ${JSON.stringify(id.slice(0, 60))}: it never existed, was deleted, or expired (emails are deleted about one hour after arrival)`);

async function rowAndViews(core: Core, id: string) {
  const row = isUuid(id) ? await core.store.getEmail(id.toLowerCase(), core.clock.now()) : null;
  const views = row && (await core.views.get(row.messageKey));
  if (!row || !views) throw notFound(id);
  return { row, views };
}

export async function getEmail(core: Core, id: string): Promise<EmailFull> {
  const { row, views } = await rowAndViews(core, id);
  const { messageKey: _key, ...summary } = row;
  const { version: _v, outcome: _o, ...content } = views;
  return { ...summary, ...content };
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
  if (!ok) throw notFound(id);
}

export async function purgeInbox(core: Core, rawAddress: string): Promise<{ address: string; deleted: number }> {
  const { address } = resolveInbox(core, rawAddress);
  return { address, deleted: await core.store.purgeInbox(address, core.clock.now()) };
}

export async function listAttachments(core: Core, emailId: string): Promise<AttachmentMeta[]> {
  return (await rowAndViews(core, emailId)).views.attachments;
}

export interface AttachmentContent {
  meta: AttachmentMeta;
  chunks: AsyncIterable<Uint8Array>;
}

export async function getAttachment(core: Core, emailId: string, attachmentId: string): Promise<AttachmentContent> {
  const { row, views } = await rowAndViews(core, emailId);
  const index = views.attachments.findIndex((a) => a.id === attachmentId);
  const bytes = index >= 0 ? await core.store.readPart(row.messageKey, index) : null;
  if (index < 0 || !bytes) {
    if (index >= 0) throw notFound(emailId); // freed meanwhile
    throw new AppError('not_found', `Email ${emailId} has no attachment ${JSON.stringify(attachmentId.slice(0, 60))}; list them at /api/v1/emails/${emailId}/attachments`);
  }
  return { meta: views.attachments[index], chunks: bytes.chunks };
}

/** `{base_url}/api/v1/emails/{id}/attachments/{attachment_id}` */
export const downloadUrl = (core: Core, emailId: string, attachmentId: string) =>
  `${core.baseUrl()}/api/v1/emails/${emailId}/attachments/${encodeURIComponent(attachmentId)}`;

/** `{base_url}/api/v1/emails/{id}/raw` */
export const rawUrl = (core: Core, emailId: string) => `${core.baseUrl()}/api/v1/emails/${emailId}/raw`;

/** `{base_url}/inbox/<address>` (DECISIONS.md: web_url). */
export const webUrl = (core: Core, address: string) => `${core.baseUrl()}/inbox/${encodeURIComponent(address).replace(/%40/g, '@')}`;
