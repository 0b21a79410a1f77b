// The mail seam: received mail as rows (one per recipient) and the messages they reference, with
// what is derived from each message. Backends (sqlite/, redis/) implement it and must pass
// test/conformance/mail.suite.ts unchanged. All times are epoch milliseconds; `now` is passed in
// (time is injected) and reads never return an email whose expiresAt <= now.
// A store returns null/false/0 for "missing"; an unreachable backend throws StoreUnavailableError.
// The other seams have files of their own (keys.ts, webhooks.ts, domains.ts, faults.ts); `Store`,
// at the end, is what a backend is: every seam, one object (docs/architecture.md "Store seams").
import type { Arrival, EmailSummary } from '../domain/summary.ts';
import type { DomainStore } from './domains.ts';
import type { FaultStore } from './faults.ts';
import type { KeyStore } from './keys.ts';
import type { MailEvents, WebhookStore } from './webhooks.ts';

/**
 * One recipient's row of a received message, before the store assigns its id. The message itself is
 * `raw`: the bytes as received (after DATA, parts over 5 MB cut out). Rows given the very same `raw`
 * object (===) share one stored message: it is stored once and freed when its last row goes.
 */
export interface NewEmail extends Arrival {
  hasAttachments: boolean;
  raw: Uint8Array;
  /**
   * The message's search text (domain/search.ts), kept with the message (rows sharing `raw` share
   * it too: the first row's is kept). Absent for mail stored without one: such a message reads as
   * having none until putSearchText gives it one.
   */
  searchText?: string;
  /**
   * What the authentication checks need from the SMTP session (services/authentication.ts), kept with
   * the message (rows sharing `raw` share it too: the first row's is kept). Absent for mail that did
   * not come over SMTP: such a message has no verdicts.
   */
  envelope?: MessageEnvelope;
}

/** The SMTP session's facts about a message that its bytes lack. */
export interface MessageEnvelope {
  /** The connecting client's IP address. */
  clientIp: string;
  /** The HELO/EHLO name it gave ('' when none). */
  helo: string;
  /** The MAIL FROM address; '' for the null sender. */
  mailFrom: string;
}

/** A message's authentication record: the envelope kept at ingest and the verdicts once computed. */
export interface StoredAuthentication {
  envelope: MessageEnvelope | null;
  /** The verdicts (an opaque document written by putAuthentication), or null until then. */
  verdicts: string | null;
}

/** The summary of a new row once the store gave it its id (every backend returns these). */
export const summaryOf = (id: string, e: NewEmail): EmailSummary => ({
  id, address: e.address, sender: e.sender, mailedBy: e.mailedBy, subject: e.subject,
  hasAttachments: e.hasAttachments, receivedAt: e.receivedAt, expiresAt: e.expiresAt,
});

/** An envelope as kept (JSON), or null when absent or unreadable. */
export function parseEnvelope(json: string | null | undefined): MessageEnvelope | null {
  if (!json) return null;
  try {
    const e = JSON.parse(json) as Partial<MessageEnvelope>;
    if (typeof e.clientIp !== 'string' || typeof e.helo !== 'string' || typeof e.mailFrom !== 'string') return null;
    return { clientIp: e.clientIp, helo: e.helo, mailFrom: e.mailFrom };
  } catch {
    return null;
  }
}

/** A stored row: the summary and the key of the message it references. */
export interface StoredEmail extends EmailSummary {
  /** Opaque; the same for every recipient of one message. */
  messageKey: string;
}

/** Bytes read from the store as they are consumed. */
export interface StoredBytes {
  sizeBytes: number;
  chunks: AsyncIterable<Uint8Array>;
}

export interface ListQuery {
  /** 1..100 */
  limit: number;
  /** Only ids > since, oldest first. */
  since?: string;
  /** Only ids < before, newest first. Never given together with since. */
  before?: string;
}

/** What a backend can and cannot do; callers branch on these flags, never on the backend's name. */
export interface StoreCapabilities {
  /** Ids are assigned by the backend itself (shared across nodes). */
  sharedAcrossProcesses: boolean;
  /**
   * Ids of different inboxes are strictly ordered by assignment too, and an addEmails spanning
   * several inboxes is all-or-none. False on Redis Cluster, where the inbox (one slot) is the unit of
   * order and atomicity: within one inbox ids always increase in the order mail becomes visible.
   */
  orderedAcrossInboxes: boolean;
}

/** The rows of received mail: one per recipient, each referencing its message by key. */
export interface MailRows {
  readonly capabilities: StoreCapabilities;

  /**
   * Stores the emails atomically (all or none) and returns their summaries in input order, with ids
   * assigned strictly increasing in that order and greater than every id assigned before. Each
   * distinct `raw` is stored once (see NewEmail). Resolves only once the data is durable (the SMTP
   * 250 depends on it). Each row gets the key of its (shared) message.
   * `events`: the webhook events of these emails, written in the same atomic write (both stored or
   * neither; on Redis Cluster, per slot as the rows are). The jobs a cap refused are set on
   * `events.dropped`. Without events nothing more is read or written than the mail.
   */
  addEmails(emails: NewEmail[], events?: MailEvents): Promise<StoredEmail[]>;

  /** Live emails of one address (lowercase). Newest first, or oldest first with `since`. */
  listEmails(address: string, query: ListQuery, now: number): Promise<EmailSummary[]>;

  /**
   * `listEmails` answered at once when this store holds that page in memory now (the read cache),
   * else undefined (ask listEmails). Optional: a backend without memory has none.
   */
  peekList?(address: string, query: ListQuery, now: number): EmailSummary[] | undefined;

  /** Whether the address holds any live email. */
  hasEmails(address: string, now: number): Promise<boolean>;

  /** One live email's row (summary and message key), or null. */
  getEmail(id: string, now: number): Promise<StoredEmail | null>;

  /**
   * Whether the search text of each email's message contains `needle` (a needle in search form,
   * domain/search.ts), in the order of `ids`: true or false, or null when the email is gone (deleted,
   * expired by `now`) or its message has no search text (stored before search texts existed). Reads
   * at most the search texts of these emails, each at most SEARCH_TEXT_MAX_CHARS.
   */
  matchText(ids: string[], needle: string, now: number): Promise<(boolean | null)[]>;

  /**
   * A count this store raises with every delete of emails it makes (one email, an inbox), when every
   * such delete of its data goes through this process (SQLite: one service process per file); absent
   * when others may delete (Redis: other nodes). The read model (services/answers.ts) answers a kept
   * email without reading its row again while the count is the one it last read the row at.
   */
  readonly deletions?: () => number;

  /** Deletes one live email (its message too when no other row references it); false when it was missing. */
  deleteEmail(id: string, now: number): Promise<boolean>;

  /** Deletes every email of an address; returns how many live ones were removed. */
  purgeInbox(address: string, now: number): Promise<number>;

  /**
   * Deletes every email with expiresAt <= now (and the messages they alone referenced); returns how
   * many. A backend sweeps its other seams' expired records in the same call (webhook events, fault
   * rules).
   */
  sweepExpired(now: number): Promise<number>;
}

/** Stored messages as received, by message key, and what is derived from each (views, parts, search text, verdicts). */
export interface MessageStore {
  /** The stored message as received, in chunks; null once its last row is gone. */
  readRaw(messageKey: string): Promise<StoredBytes | null>;

  /** The derived views of a message (an opaque document written by putViews), or null. */
  getViews(messageKey: string): Promise<string | null>;

  /**
   * Keeps the derived views of a message and its decoded parts (attachment bytes, numbered from 0),
   * replacing earlier ones. A message already freed stays freed (nothing is written).
   */
  putViews(messageKey: string, views: string, parts: Uint8Array[]): Promise<void>;

  /** Part `index` as written by putViews, or null. */
  readPart(messageKey: string, index: number): Promise<StoredBytes | null>;

  /** Gives a message that has no search text this one (mail stored before search texts existed). */
  putSearchText(messageKey: string, text: string): Promise<void>;

  /** The message's envelope and verdicts; null once the message is gone. */
  getAuthentication(messageKey: string): Promise<StoredAuthentication | null>;

  /**
   * Keeps the verdicts of a message (replacing earlier ones); a message already freed stays freed.
   * May commit with a later write (SQLite: within 200 ms): the caller keeps them in memory meanwhile.
   */
  putAuthentication(messageKey: string, verdicts: string): Promise<void>;
}

/** The mail seam: rows and their messages, and whether the backend answers. */
export interface MailStore extends MailRows, MessageStore {
  /** Throws when the backend is not reachable (health check). */
  ping(): Promise<void>;
}

/**
 * What a backend is: one object implementing every seam. Only assemble*.ts, the operator's CLI
 * (main.ts) and tests hold one; each service is given the seams it reads (services/core.ts).
 */
export interface Store extends MailStore, KeyStore {
  /** Webhook registrations and their durable delivery queue (webhooks.ts). */
  readonly webhooks: WebhookStore;

  /** Domains added and retired at run time (domains.ts). */
  readonly domains: DomainStore;

  /** SMTP fault rules set per address by API keys (faults.ts). */
  readonly faults: FaultStore;

  close(): Promise<void>;
}
