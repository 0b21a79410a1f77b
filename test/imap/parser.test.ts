// The IMAP command reader (src/imap/parser.ts): real commands parse as expected; random bytes and
// mutated real commands (cut, doubled, bytes changed, huge literal lengths, deep lists) never throw,
// and every frame that answers carries a tag (the command's, or `*` when none could be read).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createFramer, parseCommand, tagOf, type Frame } from '../../src/imap/parser.ts';

const REAL = [
  'a1 CAPABILITY',
  'a2 LOGIN "user@ephemail.test" "pass word"',
  'a3 LOGIN {17}\r\nuser@ephemail.test {3}\r\nabc',
  'a4 SELECT INBOX',
  'a5 UID FETCH 1:* (UID FLAGS RFC822.SIZE INTERNALDATE ENVELOPE BODYSTRUCTURE)',
  'a6 FETCH 1 (BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT)]<0.100>)',
  'a7 UID SEARCH OR SUBJECT "hello" FROM {5+}\r\nalice SINCE 1-Jan-2026',
  'a8 STORE 1:3,5 +FLAGS.SILENT (\\Seen \\Deleted)',
  'a9 LIST "" "*"',
  'b1 STATUS INBOX (MESSAGES UIDNEXT UIDVALIDITY UNSEEN)',
  'b2 ID ("name" "imapflow" "version" "1.0")',
  'b3 AUTHENTICATE PLAIN',
  'b4 IDLE',
  'DONE',
  'b5 FETCH 2 BODY[1.2.MIME]',
];

/** Runs bytes through a fresh framer and the tokenizer; returns every answer's tag. */
function run(bytes: Buffer, chunk = 0): { tags: string[]; frames: Frame[]; held: number } {
  const framer = createFramer();
  const tags: string[] = [];
  const frames: Frame[] = [];
  const drain = () => {
    for (let f = framer.next(); f; f = framer.next()) {
      frames.push(f);
      if (f.kind === 'error') tags.push(f.tag);
      if (f.kind === 'command') {
        const p = parseCommand(f.lines, f.literals);
        tags.push(p.ok ? p.command.tag : p.tag);
      }
    }
  };
  if (chunk <= 0) {
    framer.push(bytes);
    drain();
  } else {
    for (let i = 0; i < bytes.length; i += chunk) {
      framer.push(bytes.subarray(i, i + chunk));
      drain();
    }
  }
  return { tags, frames, held: framer.buffered };
}

test('real commands parse into tag, name and arguments', () => {
  const one = (s: string) => {
    const { frames } = run(Buffer.from(s + '\r\n'));
    const f = frames.find((x) => x.kind === 'command');
    assert.ok(f && f.kind === 'command', s);
    const p = parseCommand(f.lines, f.literals);
    assert.ok(p.ok, `${s}: ${!p.ok ? p.text : ''}`);
    return p.command;
  };
  assert.deepEqual(one('a2 LOGIN "user@ephemail.test" "pass word"').args, [{ kind: 'string', value: 'user@ephemail.test', literal: false }, { kind: 'string', value: 'pass word', literal: false }]);
  const login = one('a3 LOGIN {18}\r\nuser@ephemail.test {3}\r\nabc');
  assert.deepEqual(login.args.map((t) => t.kind !== 'list' && t.value), ['user@ephemail.test', 'abc']);
  const fetch = one('a6 FETCH 1 (BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT)]<0.100> UID)');
  assert.equal(fetch.name, 'FETCH');
  assert.deepEqual(fetch.args[1], { kind: 'list', items: [{ kind: 'atom', value: 'BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT)]<0.100>' }, { kind: 'atom', value: 'UID' }] });
  const store = one('a8 STORE 1:3,5 +FLAGS.SILENT (\\Seen \\Deleted)');
  assert.deepEqual(store.args.map((t) => t.kind), ['atom', 'atom', 'list']);
  assert.equal(one('x uid search all').name, 'UID');
});

test('bad input: tagged errors, the session goes on', () => {
  const cases: [string, string][] = [
    ['a1 LOGIN "unterminated\r\n', 'a1'],
    ['a2 FETCH 1 (((\r\n', 'a2'],
    ['a3 FETCH 1 )\r\n', 'a3'],
    ['a4 LOGIN {99999999999}\r\n', 'a4'],
    ['a5 LOGIN {4294967296}\r\n', 'a5'],
    ['a6 X \x01\r\n', 'a6'],
    ['+bad\r\n', '*'],
    ['\r\n', '*'],
    [`a7 NOOP ${'('.repeat(10_000)}\r\n`, 'a7'],
    [`a8 NOOP ${'('.repeat(100)}\r\n`, 'a8'],
    [`a9 NOOP ${'x'.repeat(1024 * 1024)}\r\n`, 'a9'],
  ];
  for (const [input, tag] of cases) {
    const { tags, frames } = run(Buffer.from(input + 'z1 NOOP\r\n'));
    assert.deepEqual(tags, [tag, 'z1'], JSON.stringify(input.slice(0, 40)));
    assert.ok(frames.every((f) => f.kind !== 'error' || !f.close), 'no close for a synchronizing literal or a long line');
  }
  // a non-synchronizing literal over the cap cannot be skipped: the stream is closed
  const { frames } = run(Buffer.from('a1 LOGIN {4294967296+}\r\n'));
  assert.deepEqual(frames, [{ kind: 'error', tag: 'a1', text: frames[0].kind === 'error' ? frames[0].text : '', close: true }]);
  assert.equal(tagOf('A001 x'), 'A001');
});

test('a synchronizing literal asks for a continuation once', () => {
  const framer = createFramer();
  framer.push(Buffer.from('a1 LOGIN {3}\r\n'));
  assert.deepEqual(framer.next(), { kind: 'continue' });
  assert.equal(framer.next(), null);
  framer.push(Buffer.from('abc "x"\r\n'));
  const f = framer.next();
  assert.ok(f?.kind === 'command');
  assert.deepEqual(f.literals.map((b) => b.toString()), ['abc']);
});

test('1,000 commands in one write: 1,000 tagged frames', () => {
  const input = Buffer.from(Array.from({ length: 1000 }, (_, i) => `t${i} NOOP\r\n`).join(''));
  const { tags } = run(input);
  assert.equal(tags.length, 1000);
  assert.equal(tags[999], 't999');
});

test('fuzz: random bytes and mutated real commands never throw, and every answer has a tag', () => {
  const mutated = fc.tuple(fc.constantFrom(...REAL), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }), fc.constantFrom('', '{4294967296}', '{99999999999999999999+}', '((((', '"', '\\', '{5}', ']', '[', '\r', '\n'))
    .map(([cmd, edits, tail]) => {
      const b = Buffer.from(cmd + tail + '\r\n');
      for (const [at, byte] of edits) b[at % b.length] = byte;
      return b;
    });
  const random = fc.uint8Array({ maxLength: 400 }).map((a) => Buffer.from(a));
  fc.assert(
    fc.property(fc.array(fc.oneof(mutated, random), { minLength: 1, maxLength: 8 }), fc.integer({ min: 0, max: 17 }), (parts, chunk) => {
      const input = Buffer.concat([...parts, Buffer.from('\r\nzz LOGOUT\r\n')]);
      const { tags, frames, held } = run(input, chunk);
      assert.ok(held <= 64 * 1024 + 8192 + 2, 'what the framer holds is bounded');
      for (const t of tags) assert.ok(t.length > 0);
      // a pending literal may hold the rest of the input; otherwise the closing command was read
      const pending = frames.at(-1)?.kind === 'continue' || frames.some((f) => f.kind === 'error' && f.close);
      if (!pending && !input.subarray(0, -14).includes('}')) assert.equal(tags.at(-1), 'zz');
    }),
    { numRuns: 3000 },
  );
});
