// The header block of a raw message, in a module of its own (no parser): the summary, the fallback
// parse and the verdicts' input (authentication-view.ts, loaded alone by the verdicts' worker) share it.

/** Splits the header block (with its blank line) off a raw message; no blank line: all head. */
export function headerBlock(raw: Uint8Array): { head: Uint8Array; body: Uint8Array } {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  let end = buf.indexOf('\r\n\r\n');
  let skip = 4;
  const lf = buf.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    skip = 2;
  }
  if (end < 0) return { head: raw, body: new Uint8Array() };
  return { head: raw.subarray(0, end + skip), body: raw.subarray(end + skip) };
}
