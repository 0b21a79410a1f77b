// The stored copy: parts whose decoded size is over the limit are cut out, everything else is kept
// byte for byte (domain/mime-cut.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import PostalMime from 'postal-mime';
import { cutOversizedParts, REMOVED_MARK } from '../../src/domain/mime-cut.ts';

const LIMIT = 1000;
const b64 = (n: number) => Buffer.alloc(n, 0x61).toString('base64').replace(/.{76}/g, '$&\r\n');
const msg = (parts: string[]) => Buffer.from([
  'From: a@example.org', 'Subject: parts', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="B"', '',
  ...parts.flatMap((p) => ['--B', p]), '--B--', '',
].join('\r\n'));
const part = (name: string, bytes: number) =>
  `Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="${name}"\r\n\r\n${b64(bytes)}`;

test('a message no larger than the limit comes back as the same object', () => {
  const raw = msg(['Content-Type: text/plain\r\n\r\nhi']).subarray(0, 400);
  assert.equal(cutOversizedParts(raw, LIMIT).raw, raw);
});

test('an oversized attachment loses its body, keeps its headers and is marked; the rest is byte for byte', async () => {
  const raw = msg(['Content-Type: text/plain\r\n\r\nhello', part('big.bin', LIMIT + 1), part('ok.bin', LIMIT)]);
  const { raw: cut, removed } = cutOversizedParts(raw, LIMIT);
  assert.equal(removed, 1);
  const text = Buffer.from(cut).toString('latin1');
  assert.ok(text.includes('filename="big.bin"'), 'the headers of the cut part stay');
  assert.ok(text.includes(`Content-Description: ${REMOVED_MARK}`));
  assert.ok(text.includes(b64(LIMIT)), 'the part at the limit is kept');
  assert.ok(!text.includes(b64(LIMIT + 1)), 'the oversized body is gone');
  const parsed = await PostalMime.parse(cut);
  assert.equal(parsed.text?.trim(), 'hello');
  assert.deepEqual(parsed.attachments.map((a) => [a.filename, a.description ?? null]), [['big.bin', REMOVED_MARK], ['ok.bin', null]]);
  // everything before the cut part is untouched
  const head = raw.indexOf('--B\r\nContent-Type: application/octet-stream');
  assert.ok(Buffer.from(cut).subarray(0, head).equals(raw.subarray(0, head)));
});

test('nested multiparts: the oversized leaf is cut however deep; quoted-printable counts decoded bytes', () => {
  const qp = 'x=\r\n'.repeat(600) + '=41'.repeat(300); // 3,300 bytes encoded, 900 decoded: kept
  const long = 'y'.repeat(LIMIT + 1); // as written, over the limit: cut
  const text = (body: string, cte: string) => `--C\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: ${cte}\r\n\r\n${body}\r\n`;
  const inner = `Content-Type: multipart/alternative; boundary="C"\r\n\r\n${text(qp, 'quoted-printable')}${text(long, '8bit')}--C\r\n${part('deep.bin', 2 * LIMIT)}\r\n--C--`;
  const { raw: cut, removed } = cutOversizedParts(msg([inner]), LIMIT);
  assert.equal(removed, 2, 'the deep attachment and the long 8bit part');
  assert.ok(Buffer.from(cut).toString('latin1').includes(qp), 'the quoted-printable part is kept');
  assert.ok(!Buffer.from(cut).toString('latin1').includes(b64(2 * LIMIT)));
});

test('base64 whose decoded size is under the limit is kept even when its text is over it', () => {
  const raw = msg([part('fits.bin', LIMIT - 10)]);
  assert.ok(raw.length > LIMIT);
  assert.equal(cutOversizedParts(raw, LIMIT).removed, 0);
});
