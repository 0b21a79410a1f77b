// The Store seam: everything the service keeps. Backends (sqlite/, redis/) implement it and must
// pass test/conformance/store.suite.ts unchanged. All times are epoch milliseconds; `now` is passed
// in (time is injected) and reads never return an email whose expiresAt <= now.
// A store returns null/false/0 for "missing"; an unreachable backend throws StoreUnavailableError.

export interface HeaderField {
  name: string;
  value: string;
}

/** An attachment as ingested: decoded bytes. */
export interface NewAttachment {
  filename: string;
  contentType: string;
  content: Uint8Array;
}

/** What every email has, from its envelope and arrival (summaries carry these). */
interface Arrival {
  /** Normalised (lowercase) inbox address. */
  address: string;
  sender: string;
  mailedBy: string | null;
  subject: string;
  receivedAt: number;
  expiresAt: number;
}

/** The parsed body and headers of a message (full emails carry these). */
export interface MessageContent {
  to: string;
  cc: string;
  messageId: string | null;
  headers: HeaderField[];
  textBody: string | null;
  htmlBody: string | null;
}

/** One parsed email for one inbox, before the store assigns its id. */
export interface NewEmail extends Arrival, MessageContent {
  attachments: NewAttachment[];
}

export interface EmailSummary extends Arrival {
  id: string;
  hasAttachments: boolean;
}

export interface AttachmentMeta {
  /** Unique within its email. */
  id: string;
  filename: string;
  contentType: string;
  sizeBytes: number;
}

export interface EmailFull extends EmailSummary, MessageContent {
  attachments: AttachmentMeta[];
}

export interface ListQuery {
  /** 1..100 */
  limit: number;
  /** Only ids > since, oldest first. */
  since?: string;
  /** Only ids < before, newest first. Never given together with since. */
  before?: string;
}

export interface KeyRecord {
  /** SHA-256 of the raw key, hex. */
  hash: string;
  prefix: string;
  label: string;
  contactEmail: string | null;
  createdAt: number;
  revokedAt: number | null;
}

export interface NewKey {
  hash: string;
  prefix: string;
  label: string;
  contactEmail: string | null;
  createdAt: number;
}

export type MintResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface AttachmentContent {
  meta: AttachmentMeta;
  /** The bytes, in chunks, read from the store as they are consumed. */
  chunks: AsyncIterable<Uint8Array>;
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

export interface Store {
  readonly capabilities: StoreCapabilities;

  /**
   * Stores the emails atomically (all or none) and returns their summaries in input order, with ids
   * assigned strictly increasing in that order and greater than every id assigned before.
   * Resolves only once the data is durable (the SMTP 250 depends on it).
   */
  addEmails(emails: NewEmail[]): Promise<EmailSummary[]>;

  /** Live emails of one address (lowercase). Newest first, or oldest first with `since`. */
  listEmails(address: string, query: ListQuery, now: number): Promise<EmailSummary[]>;

  /** Whether the address holds any live email. */
  hasEmails(address: string, now: number): Promise<boolean>;

  /** One live email with bodies and attachment metadata, or null. */
  getEmail(id: string, now: number): Promise<EmailFull | null>;

  /** Attachment metadata of a live email in stored order, or null when the email is missing. */
  listAttachments(emailId: string, now: number): Promise<AttachmentMeta[] | null>;

  /** One attachment's metadata and bytes, or null when the email or attachment is missing. */
  getAttachment(emailId: string, attachmentId: string, now: number): Promise<AttachmentContent | null>;

  /** Deletes one live email and its attachments; false when it was missing. */
  deleteEmail(id: string, now: number): Promise<boolean>;

  /** Deletes every email of an address; returns how many live ones were removed. */
  purgeInbox(address: string, now: number): Promise<number>;

  /** Deletes every email with expiresAt <= now; returns how many. */
  sweepExpired(now: number): Promise<number>;

  /**
   * Creates a key unless the IP already minted `maxPerWindow` keys within `windowMs` before `now`.
   * Atomic: parallel mints from one IP never exceed the limit. `ip` is an opaque bucket string.
   */
  mintKey(key: NewKey, ip: string, maxPerWindow: number, windowMs: number, now: number): Promise<MintResult>;

  /** The key with this hash (revoked or not), or null. */
  findKey(hash: string): Promise<KeyRecord | null>;

  /** Every key, oldest first. */
  listKeys(): Promise<KeyRecord[]>;

  /** Revokes every not-yet-revoked key whose prefix starts with `prefix`; returns them. */
  revokeKeys(prefix: string, now: number): Promise<KeyRecord[]>;

  /** Throws when the backend is not reachable (health check). */
  ping(): Promise<void>;

  close(): Promise<void>;
}
