// A message's MIME structure as IMAP shows it (RFC 3501 §6.4.5, §7.4.2): the tree of parts by byte
// offsets into the raw message (no part is copied or decoded), BODYSTRUCTURE, ENVELOPE and the bytes
// of a BODY[section]. Linear and bounded: at most MAX_DEPTH levels and MAX_PARTS parts (a message
// past them shows its deeper parts as opaque bodies); addresses go through postal-mime's parser.
import { addressParser } from 'postal-mime';

export const MAX_DEPTH = 20;
export const MAX_PARTS = 500;

export interface Field {
  /** As written. */
  name: string;
  /** Unfolded, decoded as UTF-8 (encoded words left as they are). */
  value: string;
  /** The raw lines of the field, with their line ends. */
  start: number;
  end: number;
}

export interface Part {
  /** The part's header block (without the blank line) and where the body starts and ends. */
  headerStart: number;
  headerEnd: number;
  bodyStart: number;
  bodyEnd: number;
  fields: Field[];
  type: string;
  subtype: string;
  params: [string, string][];
  children: Part[];
  /** message/rfc822: the encapsulated message. */
  message: Part | null;
}

const CRLF = Buffer.from('\r\n');

function headerEnd(raw: Buffer, start: number, end: number): { headerEnd: number; bodyStart: number } {
  // a header block that starts with its blank line is empty
  if (raw[start] === 10) return { headerEnd: start, bodyStart: start + 1 };
  if (raw[start] === 13 && raw[start + 1] === 10) return { headerEnd: start, bodyStart: start + 2 };
  for (let i = raw.indexOf(10, start); i >= 0 && i < end; i = raw.indexOf(10, i + 1)) {
    const next = raw[i + 1];
    if (next === 10) return { headerEnd: i + 1, bodyStart: i + 2 };
    if (next === 13 && raw[i + 2] === 10) return { headerEnd: i + 1, bodyStart: i + 3 };
  }
  return { headerEnd: end, bodyStart: end };
}

function parseFields(raw: Buffer, start: number, end: number): Field[] {
  const fields: Field[] = [];
  let i = start;
  while (i < end && fields.length < 1000) {
    let lineEnd = raw.indexOf(10, i);
    if (lineEnd < 0 || lineEnd >= end) lineEnd = end - 1;
    let fieldEnd = lineEnd + 1;
    // folded lines start with a space or tab
    while (fieldEnd < end && (raw[fieldEnd] === 32 || raw[fieldEnd] === 9)) {
      const e = raw.indexOf(10, fieldEnd);
      fieldEnd = e < 0 || e >= end ? end : e + 1;
    }
    const text = raw.subarray(i, fieldEnd).toString('utf8');
    const colon = text.indexOf(':');
    if (colon > 0) fields.push({ name: text.slice(0, colon).trim(), value: text.slice(colon + 1).replace(/\r?\n[ \t]/g, ' ').trim(), start: i, end: fieldEnd });
    i = fieldEnd;
  }
  return fields;
}

const field = (fields: Field[], name: string) => fields.find((f) => f.name.toLowerCase() === name)?.value;

/** `type/subtype; a=b; c="d"` → its parts (lowercase type, subtype, parameter names). */
function parseStructured(value: string | undefined): { value: string; params: [string, string][] } {
  if (value === undefined) return { value: '', params: [] };
  const params: [string, string][] = [];
  const re = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  const semi = value.indexOf(';');
  const head = (semi < 0 ? value : value.slice(0, semi)).trim();
  if (semi >= 0) {
    re.lastIndex = semi;
    for (let m = re.exec(value); m && params.length < 50; m = re.exec(value)) params.push([m[1].toLowerCase(), m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3].trim()]);
  }
  return { value: head, params };
}

/** The MIME tree of a message (or of the part between `start` and `end`). */
export function parseTree(raw: Buffer): Part {
  let count = 0;
  const make = (start: number, end: number, depth: number, defaultType: [string, string]): Part => {
    count++;
    const h = headerEnd(raw, start, end);
    const fields = parseFields(raw, start, h.headerEnd);
    const ct = parseStructured(field(fields, 'content-type'));
    let [type, subtype] = ct.value.includes('/') ? ct.value.toLowerCase().split('/', 2) : defaultType;
    if (!type || !subtype) [type, subtype] = ['text', 'plain'];
    const part: Part = { headerStart: start, headerEnd: h.headerEnd, bodyStart: h.bodyStart, bodyEnd: end, fields, type, subtype, params: ct.params, children: [], message: null };
    if (depth >= MAX_DEPTH || count >= MAX_PARTS) {
      if (type === 'multipart' || (type === 'message' && subtype === 'rfc822')) [part.type, part.subtype] = ['application', 'octet-stream'];
      return part;
    }
    if (type === 'multipart') {
      const boundary = ct.params.find(([k]) => k === 'boundary')?.[1];
      if (!boundary) {
        [part.type, part.subtype] = ['text', 'plain'];
        return part;
      }
      const delim = Buffer.from(`--${boundary}`);
      const starts: { lineStart: number; contentStart: number; close: boolean }[] = [];
      let at = h.bodyStart;
      while (at < end && starts.length < MAX_PARTS) {
        const i = raw.indexOf(delim, at);
        if (i < 0 || i >= end) break;
        const atLineStart = i === h.bodyStart || raw[i - 1] === 10;
        const afterDelim = i + delim.length;
        if (!atLineStart) {
          at = afterDelim;
          continue;
        }
        const close = raw[afterDelim] === 45 && raw[afterDelim + 1] === 45;
        let lineEnd = raw.indexOf(10, afterDelim);
        if (lineEnd < 0 || lineEnd >= end) lineEnd = end - 1;
        // the line break before the delimiter belongs to the delimiter
        let lineStart = i;
        if (lineStart > h.bodyStart && raw[lineStart - 1] === 10) lineStart--;
        if (lineStart > h.bodyStart && raw[lineStart - 1] === 13) lineStart--;
        starts.push({ lineStart, contentStart: Math.min(end, lineEnd + 1), close });
        if (close) break;
        at = lineEnd + 1;
      }
      const childDefault: [string, string] = subtype === 'digest' ? ['message', 'rfc822'] : ['text', 'plain'];
      for (let k = 0; k + 1 < starts.length || (k < starts.length && !starts[k].close); k++) {
        if (starts[k].close) break;
        const cEnd = k + 1 < starts.length ? starts[k + 1].lineStart : end;
        if (count >= MAX_PARTS) break;
        part.children.push(make(starts[k].contentStart, Math.max(starts[k].contentStart, cEnd), depth + 1, childDefault));
      }
      if (part.children.length === 0) part.children.push(make(h.bodyStart, h.bodyStart, depth + 1, ['text', 'plain']));
    } else if (type === 'message' && subtype === 'rfc822') {
      part.message = make(h.bodyStart, end, depth + 1, ['text', 'plain']);
    }
    return part;
  };
  return make(0, raw.length, 0, ['text', 'plain']);
}

// ---- IMAP strings

/** An IMAP string: quoted when plain ASCII without CR/LF/quotes troubles, else a literal. */
export function imapString(s: string | null | undefined): string {
  if (s === null || s === undefined) return 'NIL';
  if (/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/.test(s) && s.length < 1000) return `"${s}"`;
  if (/^[\x01-\x09\x0b\x0c\x0e-\x7f]*$/.test(s)) return `"${s.replace(/[\\"]/g, (c) => '\\' + c)}"`;
  return `{${Buffer.byteLength(s)}}\r\n${s}`;
}

const ascii = (s: string) => (/^[\x20-\x7e]*$/.test(s) ? s : `=?UTF-8?B?${Buffer.from(s).toString('base64')}?=`);

function paramList(params: [string, string][]): string {
  if (params.length === 0) return 'NIL';
  return `(${params.map(([k, v]) => `${imapString(k.toUpperCase())} ${imapString(v)}`).join(' ')})`;
}

/** Lines of a body: its line ends, and a last line without one. */
function countLines(raw: Buffer, start: number, end: number): number {
  let n = 0;
  for (let i = raw.indexOf(10, start); i >= 0 && i < end; i = raw.indexOf(10, i + 1)) n++;
  return end > start && raw[end - 1] !== 10 ? n + 1 : n;
}

function disposition(fields: Field[]): string {
  const d = field(fields, 'content-disposition');
  if (!d) return 'NIL';
  const p = parseStructured(d);
  if (!p.value) return 'NIL';
  return `(${imapString(p.value.toUpperCase())} ${paramList(p.params)})`;
}

/** BODYSTRUCTURE (extensible: true) or BODY (false) of a part. */
export function bodyStructure(raw: Buffer, part: Part, extensible = true): string {
  if (part.type === 'multipart') {
    const kids = part.children.map((c) => bodyStructure(raw, c, extensible)).join('');
    const ext = extensible ? ` ${paramList(part.params)} ${disposition(part.fields)} ${imapString(field(part.fields, 'content-language') ?? null)} NIL` : '';
    return `(${kids} ${imapString(part.subtype.toUpperCase())}${ext})`;
  }
  const size = part.bodyEnd - part.bodyStart;
  const enc = (field(part.fields, 'content-transfer-encoding') ?? '7BIT').toUpperCase();
  const params = part.params.length === 0 && part.type === 'text' ? [['charset', 'us-ascii']] as [string, string][] : part.params;
  let s = `(${imapString(part.type.toUpperCase())} ${imapString(part.subtype.toUpperCase())} ${paramList(params)} ${imapString(field(part.fields, 'content-id') ?? null)} ${imapString(field(part.fields, 'content-description') ?? null)} ${imapString(enc)} ${size}`;
  if (part.type === 'message' && part.subtype === 'rfc822' && part.message) {
    s += ` ${envelope(raw, part.message)} ${bodyStructure(raw, part.message, extensible)} ${countLines(raw, part.bodyStart, part.bodyEnd)}`;
  } else if (part.type === 'text') {
    s += ` ${countLines(raw, part.bodyStart, part.bodyEnd)}`;
  }
  if (extensible) s += ` ${imapString(field(part.fields, 'content-md5') ?? null)} ${disposition(part.fields)} ${imapString(field(part.fields, 'content-language') ?? null)} NIL`;
  return s + ')';
}

function addresses(value: string | undefined): string {
  if (!value) return 'NIL';
  let list: ReturnType<typeof addressParser>;
  try {
    list = addressParser(value.slice(0, 16 * 1024));
  } catch {
    return 'NIL';
  }
  const out: string[] = [];
  for (const a of list.slice(0, 100)) {
    if (a.group) {
      out.push(`(NIL NIL ${imapString(ascii(a.name))} NIL)`);
      for (const m of a.group.slice(0, 100)) out.push(mailbox(m.name, m.address));
      out.push('(NIL NIL NIL NIL)');
    } else out.push(mailbox(a.name, a.address));
  }
  return out.length === 0 ? 'NIL' : `(${out.join('')})`;
}

function mailbox(name: string, address: string | undefined): string {
  const addr = address ?? '';
  const at = addr.lastIndexOf('@');
  const local = at < 0 ? addr : addr.slice(0, at);
  const host = at < 0 ? null : addr.slice(at + 1);
  return `(${name ? imapString(ascii(name)) : 'NIL'} NIL ${imapString(local)} ${imapString(host)})`;
}

/** ENVELOPE of a message part (its own header). */
export function envelope(_raw: Buffer, message: Part): string {
  const f = (n: string) => field(message.fields, n);
  const from = addresses(f('from'));
  return `(${imapString(f('date') ?? null)} ${imapString(f('subject') ?? null)} ${from} ${f('sender') ? addresses(f('sender')) : from} ${f('reply-to') ? addresses(f('reply-to')) : from} ${addresses(f('to'))} ${addresses(f('cc'))} ${addresses(f('bcc'))} ${imapString(f('in-reply-to') ?? null)} ${imapString(f('message-id') ?? null)})`;
}

// ---- sections

export interface Section {
  /** Part numbers, e.g. [1, 2] for `1.2`; empty for the message itself. */
  path: number[];
  /** '' (the part's content), HEADER, HEADER.FIELDS, HEADER.FIELDS.NOT, TEXT, MIME. */
  kind: '' | 'HEADER' | 'HEADER.FIELDS' | 'HEADER.FIELDS.NOT' | 'TEXT' | 'MIME';
  fields: string[];
}

/** Parses the inside of `BODY[…]`; null when malformed. */
export function parseSection(spec: string): Section | null {
  const m = /^((?:[1-9]\d{0,4}\.){0,20}[1-9]\d{0,4}|)(?:(?:^|\.)(HEADER\.FIELDS\.NOT|HEADER\.FIELDS|HEADER|TEXT|MIME))?(?:\s*\(([^()]*)\))?$/i.exec(spec.trim());
  if (!m) return null;
  const path = m[1] ? m[1].split('.').map(Number) : [];
  const kind = (m[2]?.toUpperCase() ?? '') as Section['kind'];
  if (kind === 'MIME' && path.length === 0) return null;
  const list = m[3];
  if ((kind === 'HEADER.FIELDS' || kind === 'HEADER.FIELDS.NOT') !== (list !== undefined)) return null;
  const fields = list ? list.trim().split(/\s+/).filter(Boolean).map((s) => s.replace(/^"|"$/g, '').toLowerCase()) : [];
  if ((kind === 'HEADER.FIELDS' || kind === 'HEADER.FIELDS.NOT') && fields.length === 0) return null;
  return { path, kind, fields };
}

/** The part at `path` (1-based numbers; a non-multipart message's part 1 is its body); null when absent. */
function partAt(root: Part, path: number[]): Part | null {
  let cur: Part = root;
  for (const n of path) {
    // inside a message/rfc822 part, numbers address the encapsulated message's parts
    const host: Part = cur.message ?? cur;
    if (host.type === 'multipart') {
      const next = host.children[n - 1];
      if (!next) return null;
      cur = next;
    } else {
      if (n !== 1) return null;
      cur = host;
    }
  }
  return cur;
}

/** The bytes of a section, or null when the message has no such part (answered as empty). */
export function sectionBytes(raw: Buffer, root: Part, s: Section): Buffer | null {
  const part = s.path.length === 0 ? root : partAt(root, s.path);
  if (!part) return null;
  if (s.kind === '') {
    if (s.path.length === 0) return raw;
    return raw.subarray(part.bodyStart, part.bodyEnd);
  }
  if (s.kind === 'MIME') return Buffer.concat([raw.subarray(part.headerStart, part.headerEnd), CRLF]);
  // HEADER and TEXT of a part number are those of its encapsulated message
  const msg = s.path.length === 0 ? root : part.message;
  if (!msg) return null;
  if (s.kind === 'TEXT') return raw.subarray(msg.bodyStart, msg.bodyEnd);
  if (s.kind === 'HEADER') return raw.subarray(msg.headerStart, msg.bodyStart);
  const want = new Set(s.fields);
  const keep = msg.fields.filter((f) => want.has(f.name.toLowerCase()) === (s.kind === 'HEADER.FIELDS'));
  return Buffer.concat([...keep.map((f) => {
    const b = raw.subarray(f.start, f.end);
    return b[b.length - 1] === 10 ? b : Buffer.concat([b, CRLF]);
  }), CRLF]);
}

/** A header field's value of the top-level message (SEARCH HEADER, FROM, TO…). */
export const headerValue = (root: Part, name: string): string[] => root.fields.filter((f) => f.name.toLowerCase() === name).map((f) => f.value);
