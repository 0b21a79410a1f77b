// The IMAP4rev1 command reader (RFC 3501 §9, the client's side of the grammar): a framer that cuts
// the byte stream into commands (lines and the literals they announce, each capped), and a
// tokenizer that turns one command into its tag, name and arguments (atoms, strings, nested lists
// with a depth cap). Neither throws on any input: every bad command becomes an error that carries
// the command's tag when one could be read (else `*`), so every answer is tagged. Linear in the
// input; nothing recursive.

/** One argument: an atom (also NIL, numbers, sequence sets, flags, fetch items with their section), a string (quoted or literal), or a parenthesised list. */
export type Token =
  | { kind: 'atom'; value: string }
  | { kind: 'string'; value: string; literal: boolean }
  | { kind: 'list'; items: Token[] };

export interface Command {
  tag: string;
  /** Upper case. */
  name: string;
  args: Token[];
}

export type Parsed = { ok: true; command: Command } | { ok: false; tag: string; text: string };

export interface FramerLimits {
  /** Longest line (between literals), in bytes. */
  maxLine: number;
  /** Longest literal. */
  maxLiteral: number;
  /** Bytes of one command, lines and literals together. */
  maxCommand: number;
  /** Literals in one command. */
  maxLiterals: number;
}

export const DEFAULT_LIMITS: FramerLimits = Object.freeze({ maxLine: 8192, maxLiteral: 64 * 1024, maxCommand: 256 * 1024, maxLiterals: 16 });

/** Deepest nesting of parenthesised lists in one command. */
export const MAX_DEPTH = 16;
/** Arguments (tokens, lists included) in one command. */
export const MAX_TOKENS = 4096;

/** What the framer has for the server now. */
export type Frame =
  /** A whole command: its lines (literal announcements cut off) with a literal after each but the last. */
  | { kind: 'command'; lines: string[]; literals: Buffer[] }
  /** A synchronizing literal was announced and is within the caps: send `+ …` so the client sends it. */
  | { kind: 'continue' }
  /** A command refused before it was read whole; `close`: the stream cannot be followed any more. */
  | { kind: 'error'; tag: string; text: string; close: boolean };

export interface Framer {
  /** Adds bytes read from the socket. */
  push(chunk: Buffer): void;
  /** The next frame, or null when more bytes are needed. */
  next(): Frame | null;
  /** Bytes held and not yet framed. */
  readonly buffered: number;
}

/** A tag as RFC 3501 allows it (astring chars but `+`), at most 64 characters; `*` when none can be read. */
export function tagOf(line: string): string {
  const m = /^([\x21\x23\x24\x26\x27\x2c-\x5b\x5e-\x7a\x7c\x7e]{1,64})(?: |$)/.exec(line);
  return m ? m[1] : '*';
}

const LITERAL_RE = /\{(\d{1,20})(\+?)\}$/;

export function createFramer(limits: FramerLimits = DEFAULT_LIMITS): Framer {
  let buf = Buffer.alloc(0);
  let pos = 0;
  /** Where the search for the line's end goes on from (bytes before it were looked at). */
  let scanned = 0;
  let mode: 'line' | 'literal' | 'discard' = 'line';
  let need = 0;
  let announced = false;
  let lines: string[] = [];
  let literals: Buffer[] = [];
  let commandBytes = 0;
  /** The tag of the command being discarded (a line over the cap), and why. */
  let discardTag = '*';
  let discardText = '';

  const reset = () => {
    lines = [];
    literals = [];
    commandBytes = 0;
    announced = false;
  };
  const compact = () => {
    if (pos > 0 && (pos >= buf.length || pos > 65536)) {
      buf = buf.subarray(pos);
      scanned -= pos;
      pos = 0;
    }
  };
  const firstTag = () => (lines.length > 0 ? tagOf(lines[0]) : tagOf(buf.subarray(pos, Math.min(buf.length, pos + 80)).toString('latin1')));

  return {
    get buffered() {
      return buf.length - pos;
    },
    push(chunk) {
      compact();
      buf = buf.length === pos ? Buffer.from(chunk) : Buffer.concat([buf.subarray(pos), chunk]);
      scanned -= pos;
      pos = 0;
      if (scanned < 0) scanned = 0;
    },
    next() {
      for (;;) {
        if (mode === 'discard') {
          const lf = buf.indexOf(10, pos);
          if (lf < 0) {
            pos = buf.length;
            scanned = pos;
            compact();
            return null;
          }
          pos = lf + 1;
          scanned = pos;
          mode = 'line';
          const frame: Frame = { kind: 'error', tag: discardTag, text: discardText, close: false };
          reset();
          return frame;
        }
        if (mode === 'literal') {
          if (buf.length - pos < need) {
            if (!announced) {
              announced = true;
              return { kind: 'continue' };
            }
            return null;
          }
          literals.push(Buffer.from(buf.subarray(pos, pos + need)));
          pos += need;
          scanned = pos;
          mode = 'line';
          announced = false;
          continue;
        }
        const lf = buf.indexOf(10, Math.max(pos, scanned));
        if (lf < 0) {
          scanned = buf.length;
          if (buf.length - pos > limits.maxLine) {
            // a line past the cap: its tag is kept, the rest dropped until its end, then refused
            discardTag = firstTag();
            discardText = `Command line longer than ${limits.maxLine} bytes`;
            mode = 'discard';
            pos = buf.length;
            scanned = pos;
            compact();
            continue;
          }
          return null;
        }
        const end = lf > pos && buf[lf - 1] === 13 ? lf - 1 : lf;
        const len = end - pos;
        const line = buf.subarray(pos, end).toString('utf8');
        pos = lf + 1;
        scanned = pos;
        compact();
        if (len > limits.maxLine) {
          const frame: Frame = { kind: 'error', tag: lines.length > 0 ? tagOf(lines[0]) : tagOf(line), text: `Command line longer than ${limits.maxLine} bytes`, close: false };
          reset();
          return frame;
        }
        commandBytes += len;
        const m = LITERAL_RE.exec(line);
        if (!m) {
          lines.push(line);
          const frame: Frame = { kind: 'command', lines, literals };
          reset();
          return frame;
        }
        const n = Number(m[1]);
        const sync = m[2] === '';
        lines.push(line.slice(0, line.length - m[0].length));
        const tag = tagOf(lines[0]);
        if (n > limits.maxLiteral || commandBytes + n > limits.maxCommand || literals.length >= limits.maxLiterals) {
          reset();
          // a synchronizing literal is never sent after a refusal; a non-synchronizing one is on its
          // way and cannot be told from commands: the stream is closed
          return { kind: 'error', tag, text: `Literal of ${m[1].slice(0, 20)} bytes is over the limit (${limits.maxLiteral} bytes; ${limits.maxLiterals} literals, ${limits.maxCommand} bytes a command)`, close: !sync };
        }
        commandBytes += n;
        need = n;
        mode = 'literal';
        announced = !sync;
      }
    },
  };
}

/** An atom's characters (RFC 3501 ATOM-CHAR, plus `]` only inside a section and the list wildcards). */
const isAtomChar = (c: number) => c > 0x20 && c < 0x7f && c !== 0x28 && c !== 0x29 && c !== 0x7b && c !== 0x22;

/**
 * Tokenizes one framed command. Atoms may carry a bracketed section with spaces and lists inside
 * (`BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.100>`), kept as one atom.
 */
export function parseCommand(lines: string[], literals: Buffer[]): Parsed {
  const tag = tagOf(lines[0] ?? '');
  const fail = (text: string): Parsed => ({ ok: false, tag, text });
  if (tag === '*') return fail('Missing or invalid tag');
  const first = lines[0].slice(tag.length + 1);
  const nameMatch = /^([A-Za-z][A-Za-z0-9.-]{0,31})(?: |$)/.exec(first);
  if (!nameMatch) return fail('Missing or invalid command name');
  const name = nameMatch[1].toUpperCase();
  const root: Token[] = [];
  const stack: Token[][] = [root];
  let count = 0;
  for (let li = 0; li < lines.length; li++) {
    const s = li === 0 ? first.slice(nameMatch[1].length) : lines[li];
    let i = 0;
    const n = s.length;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c === 0x20) {
        i++;
        continue;
      }
      if (++count > MAX_TOKENS) return fail(`More than ${MAX_TOKENS} arguments`);
      const top = stack[stack.length - 1];
      if (c === 0x28) {
        if (stack.length > MAX_DEPTH) return fail(`Lists nested deeper than ${MAX_DEPTH}`);
        const items: Token[] = [];
        top.push({ kind: 'list', items });
        stack.push(items);
        i++;
      } else if (c === 0x29) {
        if (stack.length === 1) return fail('Unbalanced parenthesis');
        stack.pop();
        i++;
      } else if (c === 0x22) {
        let out = '';
        let j = i + 1;
        let closed = false;
        while (j < n) {
          const d = s.charCodeAt(j);
          if (d === 0x22) {
            closed = true;
            break;
          }
          if (d === 0x5c) {
            const e = s.charCodeAt(j + 1);
            if (e !== 0x22 && e !== 0x5c) return fail('Invalid escape in a quoted string');
            out += s[j + 1];
            j += 2;
            continue;
          }
          out += s[j];
          j++;
        }
        if (!closed) return fail('Unterminated quoted string');
        top.push({ kind: 'string', value: out, literal: false });
        i = j + 1;
      } else if (isAtomChar(c)) {
        let j = i;
        while (j < n) {
          const d = s.charCodeAt(j);
          if (d === 0x5b) {
            const close = s.indexOf(']', j + 1);
            if (close < 0) return fail('Unterminated section');
            j = close + 1;
            continue;
          }
          if (!isAtomChar(d)) break;
          j++;
        }
        top.push({ kind: 'atom', value: s.slice(i, j) });
        i = j;
      } else {
        return fail(`Unexpected character ${c < 0x20 || c > 0x7e ? `0x${c.toString(16)}` : JSON.stringify(s[i])}`);
      }
    }
    if (li < literals.length) {
      if (++count > MAX_TOKENS) return fail(`More than ${MAX_TOKENS} arguments`);
      stack[stack.length - 1].push({ kind: 'string', value: literals[li].toString('utf8'), literal: true });
    }
  }
  if (stack.length !== 1) return fail('Unbalanced parenthesis');
  return { ok: true, command: { tag, name, args: root } };
}

/** An argument as a string when it is an atom or a string (astring), else null. */
export function astring(t: Token | undefined): string | null {
  if (!t || t.kind === 'list') return null;
  return t.value;
}
