// The header block of a raw message, in a module of its own (no parser): the summary, the fallback
// parse and the verdicts' input (authentication-view.ts, loaded alone by the verdicts' worker) share it.

/** Splits the header block (with its blank line) off a raw message; no blank line: all head. */
export function headerBlock(raw: Uint8Array): { head: Uint8Array; body: Uint8Array } {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  let end = buf.indexOf('\r\n\r\n');
  let skip = 4;
  // a bare-LF blank line counts only before the CRLF one: searched no further (a CRLF message has
  // none, and the search would run through its whole body)
  const lf = (end < 0 ? buf : buf.subarray(0, end + 1)).indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    skip = 2;
  }
  if (end < 0) return { head: raw, body: new Uint8Array() };
  return { head: raw.subarray(0, end + skip), body: raw.subarray(end + skip) };
}

/** Fields whose checks hash the body (DKIM's and ARC's): a message with one is checked whole. */
const BODY_CHECKED = ['dkim-signature', 'arc-seal', 'arc-message-signature'];
/**
 * What the checks read of the header block of a message without such a field: From (DMARC's input),
 * Return-Path (DKIM's envelope sender for the null sender `<>`) and ARC-Authentication-Results (an ARC
 * set begun without its seal reads as one).
 */
const READ_UNSIGNED = ['from', 'return-path', 'arc-authentication-results'];

/** Whether the logical line at [at, end) is a field named `name` (any case; blanks before the colon). */
function names(buf: Buffer, at: number, end: number, name: string): boolean {
  if (end - at <= name.length) return false;
  for (let i = 0; i < name.length; i++) {
    const want = name.charCodeAt(i);
    const c = buf[at + i];
    if (want === 0x2d ? c !== want : (c | 0x20) !== want) return false;
  }
  let i = at + name.length;
  while (i < end && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
  return buf[i] === 0x3a;
}

/**
 * The header block the authentication checks need of a message that no field hashes the body of
 * (no DKIM signature, no ARC seal or message signature): its From, Return-Path and
 * ARC-Authentication-Results fields as written, then the blank line, and no body. SPF reads the
 * envelope and DMARC the From field and the results, so the verdicts are the same as the whole
 * message's; mailauth's header parser (byte by byte, ~40 ns a byte) then never reads the rest, which
 * a hostile sender can make megabytes long. null when such a field is there (the checks read the
 * message whole). One linear pass at the byte level; only the kept fields are copied. `split`: the
 * caller's `headerBlock(raw)`, when it has it.
 */
export function unsignedHead(raw: Uint8Array, split: { head: Uint8Array } = headerBlock(raw)): Uint8Array | null {
  const { head } = split;
  const buf = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  // the fields end before the blank line's own line break (none: the message is all head)
  const n = buf.length;
  const end = head === raw ? n : buf[n - 2] === 0x0d ? n - 2 : n - 1;
  const kept: [number, number][] = [];
  let size = n - end;
  for (let at = 0; at < end;) {
    // a logical line ends at the first LF that no SP or HTAB follows (within the fields)
    let nl = at;
    for (;;) {
      nl = buf.indexOf(0x0a, nl);
      if (nl < 0 || nl >= end) {
        nl = end - 1;
        break;
      }
      if (nl + 1 < end && (buf[nl + 1] === 0x20 || buf[nl + 1] === 0x09)) nl++;
      else break;
    }
    const next = nl + 1;
    // an empty line before the block's end (a message that begins with one): read whole, as before
    if (next - at <= 2 && (buf[at] === 0x0a || buf[at] === 0x0d)) return null;
    for (const name of BODY_CHECKED) if (names(buf, at, next, name)) return null;
    for (const name of READ_UNSIGNED) {
      if (names(buf, at, next, name)) {
        kept.push([at, next]);
        size += next - at;
        break;
      }
    }
    at = next;
  }
  const out = new Uint8Array(size);
  let o = 0;
  for (const [a, b] of kept) {
    out.set(buf.subarray(a, b), o);
    o += b - a;
  }
  out.set(buf.subarray(end), o);
  return out;
}
