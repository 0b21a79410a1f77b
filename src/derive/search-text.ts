// The search text of a stored message (docs/decisions.md "Body search"): what the `text` filter reads.
// Made when first needed, never at ingest: on a derivation worker, the first time a search meets the
// message (services/views.ts `searchText`), then kept beside the message. Linear in what it reads.
// A plainly structured message is read from its leaves (no parser); anything else from the full
// parse; HTML becomes words through the one converter (domain/html.ts htmlWords).
import { simpleLeaves, type Leaf } from '../domain/mime-cut.ts';
import { htmlWords } from '../domain/html.ts';
import { searchForm, SEARCH_TEXT_MAX_CHARS } from '../domain/search.ts';
import { headerBlock, parseMime, type PmEmail } from './mime.ts';
import { attachmentsOf } from './summary.ts';

/** Encoded bytes of one body part read for the search text (HTML carries markup, so more of it). */
const SEARCH_SOURCE_TEXT_BYTES = 256 * 1024;
const SEARCH_SOURCE_HTML_BYTES = 1024 * 1024;
/** Text gathered from the parts before it is put in search form (which keeps at most half of it). */
const SEARCH_GATHER_CHARS = 2 * SEARCH_TEXT_MAX_CHARS;

/** The search text of a stored message: from its leaves when plainly structured, else from the full parse. */
export async function searchTextOfRaw(raw: Uint8Array): Promise<string> {
  const leaves = simpleLeaves(raw);
  if (leaves && attachmentsOf(leaves) !== null) return leavesSearchText(raw, leaves);
  try {
    return searchTextOf(await parseMime(raw));
  } catch {
    return rawSearchText(raw); // the parser could not take it apart: its body as received
  }
}

/** The search text of a fully parsed message: its plain text, or else its HTML's words. */
export function searchTextOf(email: PmEmail): string {
  const text = email.text ? email.text : email.html ? htmlWords(email.html.slice(0, SEARCH_SOURCE_HTML_BYTES)) : '';
  return searchForm(text);
}

const decoders = new Map<string, TextDecoder>();
/** A decoder for a charset label as postal-mime picks one: the label, else windows-1252 (utf-8 when absent). */
function decoderFor(charset: string): TextDecoder {
  const label = charset || 'utf-8';
  let d = decoders.get(label);
  if (d) return d;
  try {
    d = new TextDecoder(label);
  } catch {
    d = new TextDecoder('windows-1252');
  }
  if (decoders.size < 64) decoders.set(label, d); // labels are the sender's: a bounded cache
  return d;
}

const hexValue = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);

/** Quoted-printable, decoded in one pass (soft line breaks dropped, a stray `=` kept). */
export function decodeQuotedPrintable(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(b.byteLength);
  let o = 0;
  for (let i = 0; i < b.byteLength; i++) {
    const c = b[i];
    if (c !== 0x3d) {
      out[o++] = c;
      continue;
    }
    let j = i + 1;
    while (j < b.byteLength && (b[j] === 0x20 || b[j] === 0x09)) j++; // transport padding before a soft break
    if (b[j] === 0x0d && b[j + 1] === 0x0a) {
      i = j + 1;
      continue;
    }
    if (b[j] === 0x0a) {
      i = j;
      continue;
    }
    const hi = hexValue(b[i + 1]);
    const lo = hexValue(b[i + 2]);
    if (hi >= 0 && lo >= 0) {
      out[o++] = hi * 16 + lo;
      i += 2;
    } else out[o++] = c;
  }
  return out.subarray(0, o);
}

/** One inline part's text: the first bytes of its body decoded (transfer encoding, charset); HTML as words. */
function leafText(buf: Buffer, leaf: Leaf, html: boolean): string {
  const body = buf.subarray(leaf.bodyStart, Math.min(leaf.bodyEnd, leaf.bodyStart + (html ? SEARCH_SOURCE_HTML_BYTES : SEARCH_SOURCE_TEXT_BYTES)));
  const bytes = leaf.encoding === 'base64' ? Buffer.from(body.toString('latin1'), 'base64')
    : leaf.encoding === 'quoted-printable' ? decodeQuotedPrintable(body)
    : body;
  const text = decoderFor(leaf.charset).decode(bytes);
  if (html) return htmlWords(text);
  return leaf.delsp ? text.replace(/ \r?\n/g, '') : text;
}

/**
 * The search text of a plainly structured message from its leaves (no parser), assembled the way
 * postal-mime assembles its text: the inline text parts in order, where a multipart/alternative
 * counts as one part that gives its plain text, or its HTML as words when it has no plain text. The
 * same text the full parse gives, up to white space (test/smtp/summary.test.ts compares them on the
 * corpus).
 */
export function leavesSearchText(raw: Uint8Array, leaves: Leaf[]): string {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const inline = leaves.filter((l) => !l.removed && !l.empty && l.disposition !== 'attachment' && (l.type === 'text/plain' || l.type === 'text/html'));
  const groupHasPlain = new Set(inline.filter((l) => l.type === 'text/plain' && l.alternative >= 0).map((l) => l.alternative));
  let text = '';
  for (const leaf of inline) {
    if (text.length >= SEARCH_GATHER_CHARS) break;
    const html = leaf.type === 'text/html';
    if (html && leaf.alternative >= 0 && groupHasPlain.has(leaf.alternative)) continue; // its alternative has plain text
    text += (text ? '\n' : '') + leafText(buf, leaf, html);
  }
  return searchForm(text);
}

/** The search text of a message the parser could not take apart: its body as received, as text. */
function rawSearchText(raw: Uint8Array): string {
  return searchForm(new TextDecoder('utf-8', { fatal: false }).decode(headerBlock(raw).body.subarray(0, SEARCH_SOURCE_TEXT_BYTES)));
}
