// Listing, reading and deleting mail: the use cases behind the HTTP API, the tool endpoint and the web page.
import { parseAddress, type Address } from '../domain/address.ts';
import { AppError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import type { AttachmentContent, AttachmentMeta, EmailFull, EmailSummary } from '../store/store.ts';
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

export async function getEmail(core: Core, id: string): Promise<EmailFull> {
  const email = isUuid(id) ? await core.store.getEmail(id.toLowerCase(), core.clock.now()) : null;
  if (!email) throw notFound(id);
  return email;
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
  const list = isUuid(emailId) ? await core.store.listAttachments(emailId.toLowerCase(), core.clock.now()) : null;
  if (!list) throw notFound(emailId);
  return list;
}

export async function getAttachment(core: Core, emailId: string, attachmentId: string): Promise<AttachmentContent> {
  if (!isUuid(emailId)) throw notFound(emailId);
  const att = await core.store.getAttachment(emailId.toLowerCase(), attachmentId, core.clock.now());
  if (!att) {
    const exists = await core.store.listAttachments(emailId.toLowerCase(), core.clock.now());
    if (!exists) throw notFound(emailId);
    throw new AppError('not_found', `Email ${emailId} has no attachment ${JSON.stringify(attachmentId.slice(0, 60))}; list them at /api/v1/emails/${emailId}/attachments`);
  }
  return att;
}

/** `{base_url}/api/v1/emails/{id}/attachments/{attachment_id}` */
export const downloadUrl = (core: Core, emailId: string, attachmentId: string) =>
  `${core.baseUrl()}/api/v1/emails/${emailId}/attachments/${encodeURIComponent(attachmentId)}`;

/** `{base_url}/inbox/<address>` (DECISIONS.md: web_url). */
export const webUrl = (core: Core, address: string) => `${core.baseUrl()}/inbox/${encodeURIComponent(address).replace(/%40/g, '@')}`;
