// The search text of a message (docs/decisions.md "Body search"): what the `text` filter reads. Made
// once at ingest, before the 250, and kept beside the message; a search never reads a body.
//
// It is the body as text (the plain parts, or for mail without any the HTML parts with their tags
// dropped), in one canonical form: lowercase, every run of white space one space, at most
// SEARCH_TEXT_MAX_CHARS characters. A needle is put in the same form, so matching is a plain
// substring test (case-insensitive, and a line break in the mail matches a space in the query).

/** Characters of a message's search text: body text beyond it is not searched. */
export const SEARCH_TEXT_MAX_CHARS = 32 * 1024;

/**
 * Text in its search form: lowercase, white-space runs as one space, no space at either end, cut at
 * `max` characters. Reads
 * at most 2 × max characters of `s` (one linear regex pass and one lowercasing over them).
 */
export function searchForm(s: string, max = SEARCH_TEXT_MAX_CHARS): string {
  const head = s.length > 2 * max ? s.slice(0, 2 * max) : s;
  const out = head.replace(/[\s\u0000]+/g, ' ').trim().toLowerCase();
  if (out.length <= max) return out;
  // never half a surrogate pair at the cut
  const code = out.charCodeAt(max - 1);
  return out.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/**
 * The filters of a list or a `latest` (HTTP query parameters, check_inbox arguments): each a
 * case-insensitive substring of the decoded From, the Subject, or the search text; all given must match.
 */
export const FILTER_FIELDS = ['from', 'subject', 'text'] as const;
export type FilterField = (typeof FILTER_FIELDS)[number];
/** Longest filter text accepted (every field). */
export const FILTER_MAX_CHARS = 200;

/**
 * A `text` filter's needle in search form (at most 200 characters): lowercase, white-space runs as
 * one space, not trimmed (a space the caller typed at either end still has to be there).
 */
export const searchNeedle = (text: string) => text.replace(/[\s\u0000]+/g, ' ').toLowerCase();
