// The search text (domain/search.ts, derive/search-text.ts), made when first searched: the body as
// text in search form, decoded like the parser decodes it, capped, and made in time linear in what it reads.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SEARCH_TEXT_MAX_CHARS, searchForm, searchNeedle } from '../../src/domain/search.ts';
import { decodeQuotedPrintable, leavesSearchText, searchTextOfRaw } from '../../src/derive/search-text.ts';
import { fastSummary, summarize } from '../../src/derive/summary.ts';
import { simpleLeaves } from '../../src/domain/mime-cut.ts';

const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const enc = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'));
/** As a search makes it: from the message as stored (oversized parts cut out at ingest). */
const searchText = async (raw: string | Uint8Array) => searchTextOfRaw((await summarize(typeof raw === 'string' ? enc(raw) : raw, LIMITS)).raw);

test('search form: lowercase, one space for any white space, trimmed, capped; a needle keeps its ends', () => {
  assert.equal(searchForm('  Your CODE\r\n\tis\u00a0 559120 \u0000 '), 'your code is 559120');
  assert.equal(searchForm('x'.repeat(40_000)).length, SEARCH_TEXT_MAX_CHARS);
  assert.equal(searchForm(`${'a'.repeat(SEARCH_TEXT_MAX_CHARS - 1)}👋`).length, SEARCH_TEXT_MAX_CHARS - 1, 'never half a surrogate pair');
  assert.equal(searchNeedle(' Code\nIS '), ' code is ');
});

test('plain, base64, quoted-printable and other charsets are decoded as the parser decodes them', async () => {
  const b64 = Buffer.from('Grüße, your code is 559120', 'utf8').toString('base64');
  assert.equal(await searchText(`Subject: a\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n${b64.slice(0, 10)}\r\n${b64.slice(10)}\r\n`), 'grüße, your code is 559120');
  assert.equal(await searchText('Subject: a\r\nContent-Type: text/plain; charset="ISO-8859-1"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nGr=FC=DFe, a long li=\r\nne =3D one=\r\n\r\n'), 'grüße, a long line = one');
  assert.equal(await searchText('Subject: a\r\nContent-Type: text/plain; charset=made-up-charset\r\n\r\ncaf\xe9\r\n'), 'café', 'an unknown charset is read as windows-1252');
  const jis = Buffer.from('1b244224332473244b2441244f1b2842', 'hex').toString('latin1'); // こんにちは in ISO-2022-JP
  assert.equal(await searchText(`Subject: a\r\nContent-Type: text/plain; charset=ISO-2022-JP\r\n\r\n${jis}\r\n`), 'こんにちは');
  assert.equal(await searchText('Subject: a\r\nContent-Type: text/plain; format=flowed; delsp=yes\r\n\r\nthere is \r\na flowed \r\nline\r\n'), 'there isa flowedline', 'delsp=yes joins the soft breaks');
});

test('which parts: plain over HTML in an alternative, HTML as words when there is no plain text, never attachments', async () => {
  const alt = [
    'Subject: a', 'Content-Type: multipart/mixed; boundary=m', '', '--m', 'Content-Type: multipart/alternative; boundary=b', '',
    '--b', 'Content-Type: text/plain', '', 'Plain words', '--b', 'Content-Type: text/html', '', '<p>HTML words</p>', '--b--',
    '--m', 'Content-Type: text/plain; name=a.txt', 'Content-Disposition: attachment; filename=a.txt', '', 'attached words', '--m--', '',
  ].join('\r\n');
  assert.equal(leavesSearchText(enc(alt), simpleLeaves(enc(alt))!), 'plain words', 'from the leaves (no parser)');
  assert.ok(fastSummary(enc(alt)) && !('searchText' in fastSummary(enc(alt))!), 'not made at ingest');
  assert.equal(await searchText(alt), 'plain words');
  const htmlOnly = 'Subject: a\r\nContent-Type: text/html\r\n\r\n<html><head><style>p{color:red}</style></head><body><p>Your <b>Quarterly&nbsp;Statement</b></p><script>x()</script><p>is ready</p></body></html>\r\n';
  assert.equal(await searchText(htmlOnly), 'your quarterly statement is ready');
  // not plainly structured (a forwarded message): the full parse gives it
  const forwarded = [
    'Subject: fwd', 'Content-Type: multipart/mixed; boundary=m', '', '--m', 'Content-Type: text/plain', '', 'See below', '--m',
    'Content-Type: message/rfc822', '', 'Subject: inner', '', 'inner words', '--m--', '',
  ].join('\r\n');
  assert.equal(fastSummary(enc(forwarded)), null);
  assert.match(await searchText(forwarded), /^see below/);
  assert.equal(await searchText('Subject: only headers\r\n\r\n'), '');
});

test('a large or hostile body: the search text is capped and made in time linear in what is read', async () => {
  // parts over 5 MB are cut out of the stored copy before anything reads them: just under it
  const words = 'lorem ipsum dolor sit amet '.repeat(180_000); // 4.9 MB
  const t0 = performance.now();
  const big = await searchText(`Subject: a\r\nContent-Type: text/plain\r\n\r\n${words}\r\n`);
  assert.equal(big.length, SEARCH_TEXT_MAX_CHARS);
  const qp = '='.repeat(2_400_000) + ' '.repeat(2_400_000); // stray escapes and padding
  const hostile = await Promise.all([
    searchText(`Subject: a\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${qp}\r\n`),
    searchText(`Subject: a\r\nContent-Type: text/html\r\n\r\n${'<div>'.repeat(900_000)}words\r\n`),
    searchText(`Subject: a\r\nContent-Type: text/plain\r\n\r\n${' \t'.repeat(2_400_000)}end\r\n`),
  ]);
  const ms = performance.now() - t0;
  for (const s of hostile) assert.ok(s.length <= SEARCH_TEXT_MAX_CHARS);
  // bound: linear on hostile input (a quadratic pass would take minutes); one-sided, generous
  assert.ok(ms < 10_000, `made in ${ms.toFixed(0)} ms`);
  // quoted-printable decoding itself is one pass
  const t1 = performance.now();
  assert.equal(decodeQuotedPrintable(enc(`${'= '.repeat(2_000_000)}`)).byteLength, 4_000_000);
  // bound: one pass (a quadratic one would take minutes); one-sided, generous
  assert.ok(performance.now() - t1 < 5000);
});
