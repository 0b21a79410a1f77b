// What IMAP and POP3 share (docs/imap.md): the login (an inbox address and any password, or an API
// key with no silent downgrade), the count of each request in the caller's bucket (the HTTP API's
// buckets: anonymous per IP, or the key's), and the mailbox: the address's live mail oldest first,
// numbered with UIDs (store/uids.ts), and one message's bytes as `/raw` serves them.
import type { Limits } from '../config.ts';
import { AppError, StoreUnavailableError } from '../domain/errors.ts';
import { ipBucket } from '../domain/limits.ts';
import { hitClient } from '../limiter/limiter.ts';
import type { Core } from '../services/core.ts';
import { getRaw, resolveInbox } from '../services/emails.ts';
import { authenticate, KEY_PREFIX } from '../services/keys.ts';
import { KEEP_AFTER_MS, type UidStore } from '../store/uids.ts';

export interface Grant {
  address: string;
  kind: 'anonymous' | 'key';
  /** The limiter bucket requests count in (the HTTP API's: `ip:…` or `key:<hash>`). */
  bucket: string;
  limits: Limits;
  ip: string;
  /** Concurrent waits (IDLE) this caller may hold, and the bucket they are counted in. */
  waitBucket: string;
  maxWaits: number;
}

export type Refusal = { code: 'AUTHENTICATIONFAILED' | 'LIMIT' | 'UNAVAILABLE'; text: string };

/** An error as the client is told it (never a stack): temporary when the backend is away. */
export function refusalOf(err: unknown): Refusal {
  if (err instanceof StoreUnavailableError) return { code: 'UNAVAILABLE', text: 'The store is not reachable now; try again shortly' };
  if (err instanceof AppError && (err.type === 'rate_limited' || err.type === 'quota_exceeded')) return { code: 'LIMIT', text: err.message };
  return { code: 'UNAVAILABLE', text: 'Temporary failure; try again' };
}

/**
 * Checks a login and counts it as one request: the user must be an inbox address of a served (or
 * retired) domain; a password shaped like a key (`eph_…`) must be a live key.
 */
export async function login(core: Core, user: string, password: string, ip: string): Promise<{ grant: Grant } | Refusal> {
  let address: string;
  try {
    address = resolveInbox(core, user.trim()).address;
  } catch {
    return { code: 'AUTHENTICATIONFAILED', text: 'The user name must be an inbox address at a domain of this service' };
  }
  let grant: Grant;
  const pass = password.trim();
  if (pass.startsWith(KEY_PREFIX)) {
    try {
      const key = await authenticate(core, pass);
      grant = { address, kind: 'key', bucket: `key:${key.hash}`, limits: core.config.key, ip, waitBucket: `key:${key.hash}`, maxWaits: core.config.key.concurrentWaits };
    } catch (err) {
      if (err instanceof AppError && err.type === 'unauthorized') {
        // a failed key counts against the IP, as the HTTP API counts it
        await hitClient(core.limiter, ip, core.config.anon, core.clock.now()).catch(() => undefined);
        return { code: 'AUTHENTICATIONFAILED', text: 'Invalid API key: the password looks like a key (eph_…) but is not a live one' };
      }
      return refusalOf(err);
    }
  } else {
    grant = { address, kind: 'anonymous', bucket: ipBucket(ip), limits: core.config.anon, ip, waitBucket: `mailwait:${ipBucket(ip)}`, maxWaits: core.config.key.concurrentWaits };
  }
  const refused = await countRequest(core, grant);
  return refused ?? { grant };
}

/** Counts one request in the grant's bucket; a refusal when over the limit (as the HTTP API's 429 says it). */
export async function countRequest(core: Core, grant: Grant): Promise<Refusal | null> {
  try {
    const now = core.clock.now();
    const r = grant.kind === 'anonymous' ? await hitClient(core.limiter, grant.ip, grant.limits, now) : await core.limiter.hit(grant.bucket, grant.limits, now);
    if (r.allowed) return null;
    const text = r.reason === 'quota_exceeded'
      ? `Daily quota of ${grant.limits.perDay} requests used up; it resets at 00:00 UTC`
      : `More than ${grant.limits.perMinute} requests this minute; retry in ${r.retryAfterSeconds} s`;
    return { code: 'LIMIT', text };
  } catch (err) {
    return refusalOf(err);
  }
}

export interface Listed {
  id: string;
  uid: number;
  receivedAt: number;
  sender: string;
  subject: string;
}

export interface Mailbox {
  validity: number;
  next: number;
  messages: Listed[];
}

/** A mailbox shows at most this many emails (the oldest; docs/imap.md). */
export const MAILBOX_MAX = 5000;
const PAGE = 100;
const FIRST = '00000000-0000-0000-0000-000000000000';

/** The address's live mail, oldest first, each with its UID. */
export async function listMailbox(core: Core, uids: UidStore, address: string): Promise<Mailbox> {
  const rows: { id: string; receivedAt: number; sender: string; subject: string; expiresAt: number }[] = [];
  let since = FIRST;
  let complete = true;
  for (;;) {
    const page = await core.store.listEmails(address, { limit: PAGE, since }, core.clock.now());
    rows.push(...page);
    if (page.length < PAGE) break;
    if (rows.length >= MAILBOX_MAX) {
      complete = false;
      break;
    }
    since = page[page.length - 1].id;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  if (rows.length > MAILBOX_MAX) rows.length = MAILBOX_MAX;
  const now = core.clock.now();
  const keepUntil = rows.reduce((m, r) => Math.max(m, r.expiresAt), now) + KEEP_AFTER_MS;
  const numbered = await uids.number(address, rows.map((r) => r.id), complete, keepUntil, now);
  const messages: Listed[] = [];
  for (let i = 0; i < rows.length; i++) {
    const uid = numbered.uids[i];
    if (uid > 0) messages.push({ id: rows[i].id, uid, receivedAt: rows[i].receivedAt, sender: rows[i].sender, subject: rows[i].subject });
  }
  return { validity: numbered.validity, next: numbered.next, messages };
}

/** One message's bytes, exactly as `GET /api/v1/emails/{id}/raw` serves them; null when gone. */
export async function readMessage(core: Core, id: string): Promise<Buffer | null> {
  try {
    const { raw } = await getRaw(core, id);
    const chunks: Buffer[] = [];
    for await (const c of raw.chunks) chunks.push(Buffer.from(c.buffer, c.byteOffset, c.byteLength));
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  } catch (err) {
    if (err instanceof AppError && err.type === 'not_found') return null;
    throw err;
  }
}

/** The IMAP/POP3 wait slot (IDLE): the key's concurrent waits, or as many per client IP for anonymous sessions. */
export async function takeWaitSlot(core: Core, grant: Grant, holdMs: number): Promise<(() => Promise<void>) | null> {
  return core.limiter.acquireWait(grant.waitBucket, grant.maxWaits, holdMs + 15_000, core.clock.now());
}
