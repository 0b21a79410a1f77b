// The stored copy of a message is the message as received, except that a part whose decoded size is
// over the attachment limit (spec: 5 MB) is cut out: its headers stay, its body is replaced by
// nothing, and the part gains `X-Ephemail-Removed` and a Content-Description saying why (docs/decisions.md "What is stored").
// Linear in the message size times the nesting depth (capped); no regex runs over a body.

/** Nesting this deep is walked; a multipart deeper than this is treated as one leaf part. */
const MAX_DEPTH = 32;
/** Header blocks longer than this are not searched for a boundary (the part is treated as a leaf). */
const MAX_HEAD = 256 * 1024;

export interface CutResult {
  raw: Uint8Array;
  /** Parts whose body was removed. */
  removed: number;
}

interface Head {
  /** Offset where the body starts. */
  bodyStart: number;
  boundary: string | null;
  encoding: 'base64' | 'quoted-printable' | 'other';
  /** The block's `Content-*` lines (`contentLines`), null when the block is over MAX_HEAD. */
  lines: string[] | null;
}

const CRLF = 0x0a;
/** The Content-Description a cut part carries; the derivation counts such parts as dropped attachments. */
export const REMOVED_MARK = 'ephemail: part removed (over the attachment size limit)';

/** The Latin-1 characters String.prototype.trim removes (white space and line terminators). */
const trimmable = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0;
const CONTENT_DASH = 'content-';
const byteIndexOf = Uint8Array.prototype.indexOf;

/**
 * The lines of the header block [start, end) that may be `Content-*` fields, as Latin-1 strings,
 * exactly as `.replace(/\r?\n[ \t]+/g, ' ')` then `.split(/\r?\n/)` over the whole block would give
 * them (folds joined by one space, one CR before each break dropped); every other line is passed over
 * at the byte level, never decoded. A line is kept when its first characters after what `trim()`
 * removes are `content-` in any case (no other Latin-1 character lowercases to ASCII).
 */
function contentLines(buf: Buffer, start: number, end: number): string[] {
  const out: string[] = [];
  let at = start;
  while (at < end) {
    // the line ends at the first LF that no SP or HTAB follows (within the block)
    let nl = at;
    for (;;) {
      nl = byteIndexOf.call(buf, CRLF, nl); // (V8's own search: Buffer's goes through C++ for each line)
      if (nl < 0 || nl >= end) {
        nl = end;
        break;
      }
      const next = buf[nl + 1];
      if (nl + 1 < end && (next === 0x20 || next === 0x09)) nl++;
      else break;
    }
    const lineEnd = nl < end && nl > at && buf[nl - 1] === 0x0d ? nl - 1 : nl;
    let c = at;
    while (c < lineEnd && trimmable(buf[c])) c++;
    let named = lineEnd - c >= CONTENT_DASH.length;
    for (let i = 0; named && i < CONTENT_DASH.length; i++) {
      const want = CONTENT_DASH.charCodeAt(i);
      named = want === 0x2d ? buf[c + i] === want : (buf[c + i] | 0x20) === want;
    }
    if (named) out.push(buf.toString('latin1', at, lineEnd).replace(/\r?\n[ \t]+/g, ' '));
    at = nl + 1;
  }
  return out;
}

/** Finds the end of the header block of the entity at [start, end) and the two headers that matter. */
function readHead(buf: Buffer, start: number, end: number): Head {
  let i = start;
  let bodyStart = end;
  // the header block ends at the first empty line
  if (buf[i] === 0x0d && buf[i + 1] === CRLF) bodyStart = i + 2;
  else if (buf[i] === CRLF) bodyStart = i + 1;
  else {
    for (;;) {
      const nl = buf.indexOf(CRLF, i);
      if (nl < 0 || nl >= end) break;
      const next = nl + 1;
      if (buf[next] === CRLF) {
        bodyStart = next + 1;
        break;
      }
      if (buf[next] === 0x0d && buf[next + 1] === CRLF) {
        bodyStart = next + 2;
        break;
      }
      i = next;
    }
  }
  if (bodyStart - start > MAX_HEAD) return { bodyStart, boundary: null, encoding: 'other', lines: null };
  let boundary: string | null = null;
  let encoding: Head['encoding'] = 'other';
  const lines = contentLines(buf, start, bodyStart);
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1);
    if (name === 'content-type' && /^\s*multipart\//i.test(value)) {
      const m = /;\s*boundary\s*=\s*(?:"([^"]{1,200})"|([^;\s"]{1,200}))/i.exec(value);
      if (m) boundary = m[1] ?? m[2];
    } else if (name === 'content-transfer-encoding') {
      const v = value.trim().toLowerCase();
      encoding = v === 'base64' || v === 'quoted-printable' ? v : 'other';
    }
  }
  return { bodyStart, boundary, encoding, lines };
}

/** Decoded size of a body: base64 counts its alphabet, quoted-printable its escapes; others are as long as written. */
function decodedSize(buf: Buffer, start: number, end: number, encoding: Head['encoding']): number {
  if (encoding === 'other') return end - start;
  let n = 0;
  if (encoding === 'quoted-printable') {
    for (let i = start; i < end; i++) {
      if (buf[i] !== 0x3d) n++;
      else if (buf[i + 1] === 0x0d && buf[i + 2] === CRLF) i += 2; // soft line break
      else if (buf[i + 1] === CRLF) i += 1;
      else {
        n++; // =XX is one byte
        i += 2;
      }
    }
    return n;
  }
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2f) n++;
  }
  return Math.floor((n * 3) / 4);
}

/** Offsets of the delimiter lines `--boundary` inside [start, end), each at the start of a line. */
function delimiters(buf: Buffer, start: number, end: number, boundary: string): { at: number; next: number; close: boolean }[] {
  const marker = Buffer.from(`--${boundary}`, 'latin1');
  const out: { at: number; next: number; close: boolean }[] = [];
  let i = start;
  while (i < end) {
    const at = buf.indexOf(marker, i);
    if (at < 0 || at + marker.length > end) break;
    i = at + marker.length;
    if (at !== start && buf[at - 1] !== CRLF) continue;
    const close = buf[i] === 0x2d && buf[i + 1] === 0x2d;
    const nl = buf.indexOf(CRLF, i);
    const next = nl < 0 || nl >= end ? end : nl + 1;
    out.push({ at, next, close });
    if (close) break;
    i = next;
  }
  return out;
}

/** Where a part's body ends: before the line break that precedes the next delimiter. */
const bodyEnd = (buf: Buffer, start: number, delimiterAt: number) => {
  let e = delimiterAt;
  if (e > start && buf[e - 1] === CRLF) e--;
  if (e > start && buf[e - 1] === 0x0d) e--;
  return e;
};

/**
 * Cuts every part whose decoded body exceeds `limit` bytes. A message no larger than `limit` has no
 * such part (no transfer encoding grows when decoded) and comes back as the same object.
 */
export function cutOversizedParts(raw: Uint8Array, limit: number): CutResult {
  if (raw.byteLength <= limit) return { raw, removed: 0 };
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const cuts: [number, number, number][] = []; // [head start, body start, body end]

  const walk = (start: number, end: number, depth: number) => {
    const head = readHead(buf, start, end);
    if (head.boundary && depth < MAX_DEPTH) {
      const ds = delimiters(buf, head.bodyStart, end, head.boundary);
      for (let k = 0; k < ds.length; k++) {
        if (ds[k].close) break;
        const partStart = ds[k].next;
        const partEnd = k + 1 < ds.length ? bodyEnd(buf, partStart, ds[k + 1].at) : end;
        if (partEnd > partStart) walk(partStart, partEnd, depth + 1);
      }
      return;
    }
    if (end - head.bodyStart > limit && decodedSize(buf, head.bodyStart, end, head.encoding) > limit) cuts.push([start, head.bodyStart, end]);
  };
  walk(0, buf.length, 0);
  if (cuts.length === 0) return { raw, removed: 0 };

  const pieces: Buffer[] = [];
  let at = 0;
  for (const [, bodyStart, end] of cuts) {
    // the marker goes last in the part's header block (a later Content-Description wins)
    const blank = buf[bodyStart - 2] === 0x0d ? 2 : 1;
    pieces.push(buf.subarray(at, bodyStart - blank));
    pieces.push(Buffer.from(`X-Ephemail-Removed: body of ${end - bodyStart} bytes, over the ${limit}-byte limit\r\nContent-Description: ${REMOVED_MARK}\r\n\r\n`, 'latin1'));
    at = end;
  }
  pieces.push(buf.subarray(at));
  const out = Buffer.allocUnsafeSlow(pieces.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of pieces) o += p.copy(out, o);
  return { raw: new Uint8Array(out.buffer, out.byteOffset, out.byteLength), removed: cuts.length };
}

/** The leaves of a simple message: what decides whether it has attachments, without decoding a body. */
export interface Leaf {
  /** Content-Type value, lowercase, `text/plain` when absent. */
  type: string;
  /** Content-Disposition value, lowercase, '' when absent. */
  disposition: string;
  /** The body is empty or only white space. */
  empty: boolean;
  /** The part was cut out of the stored copy (its headers carry REMOVED_MARK). */
  removed: boolean;
  /** Where its body starts and ends in the message. */
  bodyStart: number;
  bodyEnd: number;
  /** Its Content-Transfer-Encoding as far as decoding goes. */
  encoding: 'base64' | 'quoted-printable' | 'other';
  /** The Content-Type's charset parameter, lowercase, '' when absent. */
  charset: string;
  /** format=flowed with delsp=yes (RFC 3676: a space before a line break is part of the break). */
  delsp: boolean;
  /** The closest enclosing multipart/alternative (numbered in order), or -1. */
  alternative: number;
}

const TYPE_RE = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/;
const SIMPLE_MAX_DEPTH = 8;
const SIMPLE_MAX_LEAVES = 32;

/**
 * Content-Type and Content-Disposition of one header block, from the `Content-*` lines `readHead` read
 * (null there when the block is over MAX_HEAD); null when either appears twice or is odd.
 */
function typeOf(lines: string[] | null): { type: string; disposition: string; boundary: string | null; removed: boolean; charset: string; delsp: boolean } | null {
  if (lines === null) return null;
  let type: string | null = null;
  let disposition: string | null = null;
  let boundary: string | null = null;
  let charset = '';
  let delsp = false;
  let removed = false;
  for (const line of lines) {
    if (line.includes(REMOVED_MARK)) removed = true; // (a Content-Description this file wrote)
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1);
    if (name === 'content-type') {
      if (type !== null) return null;
      type = value.split(';')[0].trim().toLowerCase();
      if (!TYPE_RE.test(type)) return null;
      const m = /;\s*boundary\s*=\s*(?:"([^"]{1,200})"|([^;\s"]{1,200}))/i.exec(value);
      boundary = m ? (m[1] ?? m[2]) : null;
      const c = /;\s*charset\s*=\s*(?:"([^"]{1,64})"|([^;\s"]{1,64}))/i.exec(value);
      charset = c ? (c[1] ?? c[2]).trim().toLowerCase() : '';
      delsp = /;\s*format\s*=\s*"?flowed\b/i.test(value) && /;\s*delsp\s*=\s*"?yes\b/i.test(value);
    } else if (name === 'content-disposition') {
      if (disposition !== null) return null;
      disposition = value.split(';')[0].trim().toLowerCase();
    }
  }
  return { type: type ?? 'text/plain', disposition: disposition ?? '', boundary, removed, charset, delsp };
}

/** Whether [start, end) holds anything but white space. */
function blank(buf: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0a) return false;
  }
  return true;
}

/**
 * The leaves of a plainly structured message (nested multiparts with boundaries that are found and
 * closed, at most 8 deep and 32 leaves, each header at most once), or null for anything else: the
 * caller then parses the message in full.
 */
export function simpleLeaves(raw: Uint8Array): Leaf[] | null {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const leaves: Leaf[] = [];
  let alternatives = 0;
  const walk = (start: number, end: number, depth: number, alternative: number): boolean => {
    const { bodyStart, encoding, lines } = readHead(buf, start, end);
    const t = typeOf(lines);
    if (!t) return false;
    if (t.type.startsWith('multipart/')) {
      if (!t.boundary || depth >= SIMPLE_MAX_DEPTH || t.type === 'multipart/digest') return false;
      const ds = delimiters(buf, bodyStart, end, t.boundary);
      if (ds.length < 2 || !ds[ds.length - 1].close) return false;
      const inner = t.type === 'multipart/alternative' ? alternatives++ : alternative;
      for (let k = 0; k + 1 < ds.length; k++) {
        const partStart = ds[k].next;
        if (!walk(partStart, bodyEnd(buf, partStart, ds[k + 1].at), depth + 1, inner)) return false;
      }
      return true;
    }
    leaves.push({
      type: t.type, disposition: t.disposition, empty: blank(buf, bodyStart, end), removed: t.removed,
      bodyStart, bodyEnd: end, encoding, charset: t.charset, delsp: t.delsp, alternative,
    });
    return leaves.length <= SIMPLE_MAX_LEAVES;
  };
  return walk(0, buf.length, 0, -1) ? leaves : null;
}
