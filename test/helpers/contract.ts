// Contract assertions shared by the HTTP tests: the error envelope, the rate-limit headers, wire
// field types (spec: Errors, Limits, Resources and their fields; docs/contract-decisions.md).
import assert from 'node:assert/strict';
import { EmailFullSchema } from '../../src/http/schemas/wire.ts';

export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Reads a JSON body and checks the error envelope: exactly {error:{type,message,docs}}, docs = {base}/docs#error-<type>. */
export async function expectError(res: Response, status: number, type: string, base: string, messageRe?: RegExp): Promise<{ type: string; message: string; docs: string }> {
  const text = await res.text();
  assert.equal(res.status, status, `status for ${type}: ${text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, 'error content-type');
  let body: any;
  assert.doesNotThrow(() => (body = JSON.parse(text)), `error body is JSON: ${text}`);
  assert.deepEqual(Object.keys(body), ['error'], `only "error" at top level: ${text}`);
  assert.deepEqual(Object.keys(body.error).sort(), ['docs', 'message', 'type'], `error fields: ${text}`);
  assert.equal(body.error.type, type, text);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.doesNotMatch(body.error.message, /\n\s+at .+:\d+/, 'no stack trace in message');
  assert.doesNotMatch(text, /"stack"|"statusCode"|FST_|"code"/, 'no framework-default fields');
  assert.equal(body.error.docs, `${base}/docs#error-${type}`);
  if (messageRe) assert.match(body.error.message, messageRe, `message: ${body.error.message}`);
  if (status === 429) {
    const ra = res.headers.get('retry-after');
    assert.ok(ra && /^\d+$/.test(ra) && Number(ra) >= 1, `retry-after on 429: ${ra}`);
  }
  return body.error;
}

/** ratelimit-limit/remaining/reset present and non-negative integers. */
export function expectLimitHeaders(res: Response, label = ''): { limit: number; remaining: number; reset: number } {
  const out: Record<string, number> = {};
  for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
    const v = res.headers.get(h);
    assert.ok(v !== null && /^\d+$/.test(v), `${h} on ${label || res.url}: ${v}`);
    out[h] = Number(v);
  }
  return { limit: out['ratelimit-limit'], remaining: out['ratelimit-remaining'], reset: out['ratelimit-reset'] };
}

/** Asserts an object has exactly these keys (order-free). */
export function expectKeys(obj: unknown, keys: string[], label = ''): void {
  assert.ok(obj && typeof obj === 'object' && !Array.isArray(obj), `${label} is an object`);
  assert.deepEqual(Object.keys(obj as object).sort(), [...keys].sort(), `${label} keys`);
}

export const SUMMARY_KEYS = ['id', 'address', 'sender', 'mailed_by', 'subject', 'has_attachments', 'received_at', 'expires_at'];
// the spec's fields, then the additive ones (raw_url, attachments_dropped; content_id; spam, html_check, authentication)
export const FULL_KEYS = [...SUMMARY_KEYS, 'to', 'cc', 'message_id', 'headers', 'text_body', 'html_body', 'attachments', 'attachments_dropped', 'raw_url', 'codes', 'links', 'spam', 'html_check', 'authentication'];
export const ATTACHMENT_KEYS = ['id', 'filename', 'content_type', 'size_bytes', 'download_url', 'content_id'];

export function expectSummary(e: any, ttlSeconds = 3600): void {
  expectKeys(e, SUMMARY_KEYS, 'email summary');
  assert.match(e.id, UUID_V7);
  assert.equal(typeof e.address, 'string');
  assert.equal(typeof e.sender, 'string');
  assert.ok(e.mailed_by === null || typeof e.mailed_by === 'string');
  assert.equal(typeof e.subject, 'string');
  assert.equal(typeof e.has_attachments, 'boolean');
  assert.match(e.received_at, ISO_UTC);
  assert.match(e.expires_at, ISO_UTC);
  assert.equal(Date.parse(e.expires_at) - Date.parse(e.received_at), ttlSeconds * 1000);
}

export function expectFull(e: any, ttlSeconds = 3600): void {
  // the contract's fields, and the additive ones of the registry's views (its published schema)
  expectKeys(e, [...new Set([...FULL_KEYS, ...Object.keys(EmailFullSchema.properties)])], 'full email');
  const { to, cc, message_id, headers, text_body, html_body, attachments, attachments_dropped, raw_url, codes, links, spam, html_check, authentication } = e;
  const summary = Object.fromEntries(SUMMARY_KEYS.map((k) => [k, e[k]]));
  // docs/sender-checks.md: null without a spamd / without an HTML part
  assert.ok(spam === null || (typeof spam === 'object' && (typeof spam.error === 'string' || typeof spam.score === 'number')), 'spam');
  assert.ok(html_check === null || (typeof html_check === 'object' && Array.isArray(html_check.features)), 'html_check');
  // null until computed (docs/authentication.md), then SPF, DKIM, DMARC, ARC and a header value
  assert.ok(authentication === null || (typeof authentication.spf?.result === 'string' && Array.isArray(authentication.dkim)
    && typeof authentication.dmarc?.result === 'string' && typeof authentication.arc?.result === 'string' && typeof authentication.header === 'string'), 'authentication');
  assert.ok(Array.isArray(codes) && codes.every((c: any) => typeof c.value === 'string' && c.value !== '' && typeof c.context === 'string'));
  assert.ok(Array.isArray(links) && links.every((l: any) => typeof l.url === 'string' && typeof l.text === 'string'
    && ['verify', 'reset_password', 'login', 'unsubscribe', 'view_online', 'other'].includes(l.kind) && (l.destination === null || typeof l.destination === 'string')));
  expectSummary(summary, ttlSeconds);
  assert.ok(Number.isInteger(attachments_dropped) && attachments_dropped >= 0);
  assert.match(raw_url, new RegExp(`/api/v1/emails/${e.id}/raw$`));
  assert.equal(typeof to, 'string');
  assert.equal(typeof cc, 'string');
  assert.ok(message_id === null || typeof message_id === 'string');
  assert.ok(Array.isArray(headers));
  for (const h of headers) {
    expectKeys(h, ['name', 'value'], 'header');
    assert.equal(typeof h.name, 'string');
    assert.equal(typeof h.value, 'string');
  }
  assert.ok(text_body === null || typeof text_body === 'string');
  assert.ok(html_body === null || typeof html_body === 'string');
  assert.ok(Array.isArray(attachments));
  assert.equal(e.has_attachments, attachments.length > 0);
  for (const a of attachments) {
    expectKeys(a, ATTACHMENT_KEYS, 'attachment');
    assert.equal(typeof a.id, 'string');
    assert.ok(a.filename.length > 0);
    assert.equal(typeof a.content_type, 'string');
    assert.ok(Number.isInteger(a.size_bytes) && a.size_bytes >= 0);
    assert.ok(a.content_id === null || (typeof a.content_id === 'string' && a.content_id.length > 0));
  }
}

/** Polls the inbox until it holds `n` emails (mail is stored before the 250, so usually at once). */
export async function listAll(api: (p: string, i?: RequestInit) => Promise<Response>, address: string, init?: RequestInit): Promise<any[]> {
  const res = await api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100`, init);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).data;
}

