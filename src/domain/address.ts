// Inbox addresses: what an address at an active domain may look like (spec: Inbox; docs/contract-decisions.md
// "Addresses in paths"). SMTP RCPT and the HTTP path use the same rule, so every address that can
// receive mail can be named by the API.

export interface Address {
  address: string;
  localPart: string;
  domain: string;
}

/** A local part the API can name: dot-atom text (RFC 5322 atext, ASCII or UTF-8 letters and digits), at most 64 octets. */
const LOCAL_RE = /^[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+(?:\.[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+)*$/u;
const DOMAIN_RE = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
/** Zero-width and bidi control characters: never part of an address. */
const INVISIBLE_RE = /[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

/** The pattern of a local part chosen through POST /inboxes (spec: POST /api/v1/inboxes). */
export const CREATE_LOCAL_PART_RE = /^[a-z0-9][a-z0-9._+-]{0,63}$/;

/**
 * Parses and normalises (lowercases) an address. Returns null when it is malformed: no single
 * `@`, a local part that is not dot-atom text or over 64 bytes, a bad domain name.
 */
export function parseAddress(input: string): Address | null {
  if (input.length > 320) return null;
  const s = input.normalize('NFC').toLowerCase();
  const at = s.lastIndexOf('@');
  if (at <= 0 || at !== s.indexOf('@')) return null;
  const localPart = s.slice(0, at);
  const domain = s.slice(at + 1).replace(/\.$/, '');
  if (Buffer.byteLength(localPart) > 64 || !LOCAL_RE.test(localPart) || INVISIBLE_RE.test(localPart)) return null;
  if (!DOMAIN_RE.test(domain)) return null;
  return { address: `${localPart}@${domain}`, localPart, domain };
}

/**
 * A domain name as the service keeps it (lowercase, no trailing dot, LDH labels of at most 63, 253
 * in all), or null when `input` is not one. The rule EPHEMAIL_DOMAINS and addresses follow.
 */
export function normalizeDomain(input: string): string | null {
  const d = input.trim().toLowerCase().replace(/\.$/, '');
  return DOMAIN_RE.test(d) ? d : null;
}

/** Domain of an SMTP envelope sender, lowercased; null for the null sender `<>` (docs/contract-decisions.md: mailed_by). */
export function mailedByOf(envelopeFrom: string | false | null | undefined): string | null {
  if (!envelopeFrom) return null;
  const at = envelopeFrom.lastIndexOf('@');
  if (at < 0) return null;
  const domain = envelopeFrom.slice(at + 1).trim().toLowerCase().replace(/\.$/, '');
  return domain || null;
}

/** A random local part of `length` characters of [a-z0-9], from the supplied byte source. */
export function randomLocalPart(length: number, randomBytes: (n: number) => Uint8Array): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 252 && out.length < length) out += alphabet[b % 36]; // 252 = 7 * 36: no modulo bias
    }
  }
  return out;
}
