// Types of @ephemail/client; the wire shapes come from the service's OpenAPI document (schema.d.ts).
import type { Client } from 'openapi-fetch';
import type { components, paths } from './schema.d.ts';

export type { components, paths };
export type Email = components['schemas']['Email'];
export type EmailSummary = components['schemas']['EmailSummary'];
/** SPF, DKIM, DMARC and ARC verdicts of an email (`email.authentication`, null until computed). */
export type Authentication = components['schemas']['Authentication'];
export type Code = components['schemas']['Code'];
export type Link = components['schemas']['Link'];
export type LinkKind = Link['kind'];
export type Fault = components['schemas']['Fault'];
export type FaultInput = NonNullable<paths['/api/v1/inboxes/{address}/faults']['post']['requestBody']>['content']['application/json'];

/** The `kind` enum of the schema `Link`. */
export declare const LINK_KINDS: readonly LinkKind[];
/** The kinds of a main action link (waitForLink's default). */
export declare const ACTION_LINK_KINDS: readonly LinkKind[];
/** The largest answer body the client reads unless `maxBodyBytes` says otherwise: 64 MiB. */
export declare const DEFAULT_MAX_BODY_BYTES: number;
export declare class EphemailError extends Error {
  /**
   * The spec's error type (not_found, rate_limited, key_required, …, or http_error / internal_error
   * for an error answer without one), or the client's own: timeout, no_code, no_link,
   * unexpected_email; invalid_response (not JSON, or without a field the client reads),
   * response_too_large (a body above maxBodyBytes), redirect_refused (a redirect to another origin),
   * connection_error (an answer cut off).
   */
  readonly type: string;
  /** HTTP status (0 when the error is the client's own). */
  readonly status: number;
  /** Seconds, from retry-after, when the service gave one. */
  readonly retryAfter: number | null;
}
export declare class EphemailTimeoutError extends EphemailError {}

/** A UUIDv7 made from a time (default now): a `since` cursor meaning "only mail from then on". */
export declare function idAt(ms?: number): string;

export interface Filters {
  /** Case-insensitive substring of the decoded From. */
  from?: string;
  /** Case-insensitive substring of the decoded Subject. */
  subject?: string;
}

export interface EmailWithRaw extends Email {
  /** The message as received (.eml bytes). */
  raw(): Promise<Uint8Array>;
}

export interface Inbox {
  readonly address: string;
  emails(query?: paths['/api/v1/inboxes/{address}/emails']['get']['parameters']['query']): Promise<EmailSummary[]>;
  waitForEmail(options?: Filters & { since?: string; timeoutMs?: number }): Promise<EmailWithRaw>;
  waitForCode(options?: Filters & { since?: string; timeoutMs?: number }): Promise<string>;
  waitForLink(options?: Filters & { kind?: LinkKind; since?: string; timeoutMs?: number }): Promise<Link>;
  expectNoEmail(ms: number, filters?: Filters): Promise<void>;
  clear(): Promise<number>;
  /** SMTP faults on demand for this address (docs/faults.md); a key is minted once if none was given. */
  readonly faults: InboxFaults;
}

export interface InboxFaults {
  /** Adds a rule: `{ stage: 'rcpt' | 'data', reply: '451 4.7.1 Try again later', times?: 2 }`, `{ stage: 'data', delay_seconds: 20 }` or `{ stage: 'data', disconnect: true }`. */
  add(rule: FaultInput): Promise<Fault>;
  /** This key's rules on the address, in the order they apply. */
  list(): Promise<Fault[]>;
  /** Removes one rule by id. */
  remove(id: string): Promise<void>;
  /** Removes this key's rules on the address; resolves with how many. */
  clear(): Promise<number>;
}

export interface Ephemail {
  /** The typed API itself (openapi-fetch). */
  readonly api: Client<paths>;
  readonly baseUrl: string;
  /** The key in use (given, remembered from the key cache, or minted on the first wait). */
  readonly apiKey: string | null;
  createInbox(body?: { domain?: string; local_part?: string }): Promise<Inbox>;
  inbox(address: string): Inbox;
  getEmail(id: string): Promise<EmailWithRaw>;
  /** The key in use: the one given, else the one minted for this base URL before (the key cache), else a free one minted now (once per client) and remembered. */
  ensureKey(): Promise<string>;
}

/** Where minted keys are remembered, by base URL. */
export interface KeyCache {
  get(baseUrl: string): string | null | Promise<string | null>;
  set(baseUrl: string, apiKey: string): unknown;
  /** Drops `apiKey` for `baseUrl` (the service answered 401 to it). */
  forget(baseUrl: string, apiKey: string): unknown;
}

export interface EphemailOptions {
  /** The service (default http://localhost:8025). */
  baseUrl?: string;
  /** A key; without one, the first wait uses the key minted for this base URL before, else mints one and remembers it. */
  apiKey?: string;
  /**
   * Where minted keys are remembered: in Node by default the user's cache file (EPHEMAIL_KEY_CACHE,
   * else $XDG_CACHE_HOME/ephemail/keys.json or ~/.cache/ephemail/keys.json, mode 600), elsewhere
   * none; `false`: none.
   */
  keyCache?: KeyCache | false;
  fetch?: typeof fetch;
  /** The largest answer body read, in bytes (default DEFAULT_MAX_BODY_BYTES, 64 MiB); a larger one is a `response_too_large` EphemailError. */
  maxBodyBytes?: number;
}

export declare function createEphemail(options?: EphemailOptions): Ephemail;
