// The MIME structure IMAP shows (src/imap/mime.ts): sections by part number, HEADER/TEXT/MIME of an
// attached message, BODYSTRUCTURE and ENVELOPE strings, and bounds on hostile structure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bodyStructure, envelope, MAX_DEPTH, parseSection, parseTree, sectionBytes } from '../../src/imap/mime.ts';

const MSG = Buffer.from([
  'From: =?UTF-8?B?w4lsaXNl?= <elise@example.org>',
  'To: a@ephemail.test, "Bob, Jr." <b@ephemail.test>',
  'Subject: Nested',
  'Message-ID: <x@y>',
  'Content-Type: multipart/mixed; boundary="outer"',
  '',
  'preamble',
  '--outer',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Hello',
  '--outer',
  'Content-Type: message/rfc822',
  'Content-Disposition: attachment; filename="fwd.eml"',
  '',
  'Subject: Inner',
  'From: inner@example.org',
  'Content-Type: multipart/alternative; boundary=inner',
  '',
  '--inner',
  'Content-Type: text/plain',
  '',
  'inner text',
  '--inner',
  'Content-Type: text/html',
  '',
  '<p>inner</p>',
  '--inner--',
  '',
  '--outer--',
  '',
].join('\r\n'));

const section = (spec: string) => {
  const s = parseSection(spec);
  assert.ok(s, spec);
  return sectionBytes(MSG, parseTree(MSG), s)?.toString() ?? null;
};

test('sections: part numbers, an attached message\'s HEADER, TEXT and parts, MIME, HEADER.FIELDS', () => {
  assert.equal(section('1'), 'Hello');
  assert.equal(section('1.MIME'), 'Content-Type: text/plain; charset=utf-8\r\n\r\n');
  assert.match(section('2.HEADER')!, /^Subject: Inner\r\nFrom: inner@example.org\r\nContent-Type: multipart\/alternative; boundary=inner\r\n\r\n$/);
  // RFC 3501 6.4.5: the parts of an attached multipart message are numbered right below its own number
  assert.equal(section('2.1'), 'inner text');
  assert.equal(section('2.2'), '<p>inner</p>');
  assert.equal(section('2.3'), null);
  assert.match(section('2.TEXT')!, /^--inner\r\n/);
  assert.equal(section('HEADER.FIELDS (SUBJECT MESSAGE-ID)'), 'Subject: Nested\r\nMessage-ID: <x@y>\r\n\r\n');
  assert.doesNotMatch(section('HEADER.FIELDS.NOT (SUBJECT)')!, /Subject/);
  assert.equal(section('9'), null);
  assert.equal(parseSection('1.MIME.TEXT'), null);
  assert.equal(parseSection('MIME'), null);
  assert.equal(section(''), MSG.toString());
});

test('BODYSTRUCTURE and ENVELOPE', () => {
  const tree = parseTree(MSG);
  const bs = bodyStructure(MSG, tree);
  assert.match(bs, /^\(\("TEXT" "PLAIN" \("CHARSET" "utf-8"\) NIL NIL "7BIT" 5 1 NIL NIL NIL NIL\)\("MESSAGE" "RFC822" NIL NIL NIL "7BIT" \d+ \(NIL "Inner" /);
  assert.match(bs, /"ALTERNATIVE" \("BOUNDARY" "inner"\) NIL NIL NIL\) \d+ NIL \("ATTACHMENT" \("FILENAME" "fwd.eml"\)\) NIL NIL\) "MIXED" \("BOUNDARY" "outer"\) NIL NIL NIL\)$/);
  const env = envelope(MSG, tree);
  assert.equal(env, '(NIL "Nested" (("=?UTF-8?B?w4lsaXNl?=" NIL "elise" "example.org")) (("=?UTF-8?B?w4lsaXNl?=" NIL "elise" "example.org")) (("=?UTF-8?B?w4lsaXNl?=" NIL "elise" "example.org")) ((NIL NIL "a" "ephemail.test")("Bob, Jr." NIL "b" "ephemail.test")) NIL NIL NIL "<x@y>")');
});

test('hostile structure stays bounded: deep nesting, many parts, no boundary', () => {
  let deep = 'Content-Type: text/plain\r\n\r\nleaf';
  for (let i = 0; i < 200; i++) deep = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${deep}\r\n--b${i}--\r\n`;
  const t0 = performance.now();
  const tree = parseTree(Buffer.from(deep));
  let depth = 0;
  for (let p = tree; p.children.length > 0; p = p.children[0]) depth++;
  assert.ok(depth <= MAX_DEPTH);
  const many = Buffer.from(`Content-Type: multipart/mixed; boundary=x\r\n\r\n${'--x\r\n\r\na\r\n'.repeat(5000)}--x--\r\n`);
  assert.ok(parseTree(many).children.length <= 500);
  const none = parseTree(Buffer.from('Content-Type: multipart/mixed\r\n\r\nno boundary'));
  assert.equal(none.type, 'text');
  assert.ok(bodyStructure(Buffer.from(deep), tree).length > 0);
  assert.ok(performance.now() - t0 < 2000); // bound: linear work, far below two seconds on any machine
});
