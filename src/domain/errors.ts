// The one error type of the service (spec: Errors). Every edge translates it in one place:
// the HTTP envelope (http/plugins/errors.ts), the MCP isError result (mcp/), the SMTP reply (smtp/).

/**
 * Error types and their HTTP statuses. `address_in_use` (docs/contract-decisions.md), `forbidden` and
 * `too_many_webhooks` (docs/push.md) and `conflict` (the admin API, docs/deploy.md) are added types.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  key_required: 401,
  forbidden: 403,
  not_found: 404,
  address_in_use: 409,
  too_many_webhooks: 409,
  conflict: 409,
  rate_limited: 429,
  quota_exceeded: 429,
  too_many_waiters: 429,
  internal_error: 500,
} as const;

export type ErrorType = keyof typeof ERROR_STATUS;
export const ERROR_TYPES = Object.keys(ERROR_STATUS) as ErrorType[];

/** What each error type means, for the OpenAPI document and /docs. */
export const ERROR_MEANING: Record<ErrorType, string> = {
  invalid_request: 'Malformed parameters or body. The message names the offending field.',
  unauthorized: 'A key was sent but is invalid or revoked. There is no silent downgrade to anonymous.',
  key_required: 'The feature (`wait`, the event stream, webhooks, SMTP fault rules) needs an API key.',
  forbidden: 'The request is understood but this instance does not allow it for this key (a *@<domain> webhook where the operator has not enabled it); the message says what to do instead.',
  not_found: 'No such resource; most often the email expired (about one hour after arrival).',
  address_in_use: 'An explicit local_part was asked for, but that address already holds mail. Delete its mail first, or omit local_part for a random empty address.',
  too_many_webhooks: 'The key already has its maximum number of webhooks (10 by default; delete one first), or the address already has 10 webhooks from all keys together.',
  conflict: 'The change contradicts the configuration or a bound: admin API (retiring a domain of EPHEMAIL_DOMAINS, too many active domains), SMTP fault rules (20 per address for each key, 1,000 per key). The message says which.',
  rate_limited: 'Per-minute limit exceeded; the retry-after header gives seconds.',
  quota_exceeded: 'Daily quota exhausted; it resets at 00:00 UTC and waiting for the minute window does not help.',
  too_many_waiters: 'The key already has its maximum long-polls in flight.',
  internal_error: 'Server fault; retry with backoff (see retry-after when present).',
};

/**
 * What the caller can do next, named by the service and put in words by each edge (an HTTP path, a
 * tool name): services speak no transport.
 */
export type ErrorHint =
  | { kind: 'list_domains' }
  | { kind: 'empty_inbox'; address: string }
  | { kind: 'list_attachments'; emailId: string }
  | { kind: 'create_key' }
  | { kind: 'delete_webhook' };

/** The input fields a service names; each edge calls them by its own names (local_part, name, since_id…). */
export type ErrorField = 'address' | 'domain' | 'localPart' | 'from' | 'subject' | 'text' | 'since' | 'before';

export class AppError extends Error {
  readonly type: ErrorType;
  readonly status: number;
  /** Seconds the client should wait before retrying (429 and some 500s). */
  readonly retryAfter?: number;
  /** The input at fault: the message follows its name, which the edge writes (`<name> <message>`). */
  readonly field?: ErrorField;
  readonly hint?: ErrorHint;

  constructor(type: ErrorType, message: string, options: { retryAfter?: number; cause?: unknown; field?: ErrorField; hint?: ErrorHint } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.type = type;
    this.status = ERROR_STATUS[type];
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter;
    if (options.field !== undefined) this.field = options.field;
    if (options.hint !== undefined) this.hint = options.hint;
  }
}

/** An error's words for one edge: its field names and how it says each hint. */
export interface ErrorWording {
  fields: Record<ErrorField, string>;
  hint(h: ErrorHint): string;
}

/** The message as an edge says it: `<field name> <message><hint>`. */
export function describeError(err: AppError, words: ErrorWording): string {
  const head = err.field ? `${words.fields[err.field]} ${err.message}` : err.message;
  return err.hint ? head + words.hint(err.hint) : head;
}

/** Thrown by a store or bus when its backend cannot be reached: a temporary fault (HTTP 500 + retry-after, SMTP 451). */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/** The store has no room left (disk or database full): a temporary fault with its own SMTP reply (452). */
export class StoreFullError extends StoreUnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreFullError';
  }
}
