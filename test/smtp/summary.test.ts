// The summary at ingest: the fast path (top header block only, for mail whose every part is inline
// text) must give exactly what the full parse gives, on every real-world message we have.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import PostalMime, { decodeWords } from 'postal-mime';
import { leavesSearchText, searchTextOf } from '../../src/derive/search-text.ts';
import { fastSummary, summarize } from '../../src/derive/summary.ts';
import { REMOVED_MARK, simpleLeaves } from '../../src/domain/mime-cut.ts';
import { toWire } from '../helpers/smtp.ts';
import { CORPUS, corpusMissing } from '../helpers/corpus.ts';

const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const FIXTURES = resolve(import.meta.dirname, '../fixtures');
// the real-world corpus vendored under test/fixtures/corpus is read once, as CORPUS
const VENDORED_CORPUS = join(FIXTURES, 'corpus');
function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (p === VENDORED_CORPUS && dir === FIXTURES) continue;
    if (statSync(p).isDirectory()) files(p, out);
    else if (/\.(eml|raw|msg|txt)$/i.test(name) || !name.includes('.')) out.push(p);
  }
  return out;
}

/** The fast path gives exactly what the full parse gives (search text included) on every message; returns how often it was taken. */
async function sameAsFullParse(all: string[], t: { diagnostic(msg: string): void }): Promise<number> {
  let fast = 0;
  const differ: string[] = [];
  const searchDiffer: string[] = [];
  for (const path of all) {
    // as the receiver gets it: CRLF line ends, the terminating line break kept
    const raw = new Uint8Array(Buffer.from(toWire(readFileSync(path)).toString('latin1').replace(/^\.\./gm, '.'), 'latin1'));
    const quick = fastSummary(raw);
    if (!quick) continue;
    fast++;
    // the full parse, by way of the same code with the fast path out of the picture
    const email = await PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer', maxNestingDepth: 256 }).catch(() => null);
    if (!email) {
      differ.push(`${path}: fast path taken, full parse fails`);
      continue;
    }
    const from = email.headers.find((h) => h.key === 'from');
    const oneLine = (s: string) => s.replace(/\r?\n[ \t]*/g, ' ').replace(/[\r\n]/g, ' ').replace(/\u0000/g, '');
    const cap = (s: string) => (s.length > 1000 ? `${s.slice(0, 999)}…` : s);
    const full = {
      sender: cap(from ? oneLine(decodeWords(from.value.slice(0, 64 * 1024))) : ''),
      subject: cap(oneLine(email.subject ?? '')),
      hasAttachments: email.attachments.length > 0,
    };
    const head = quick;
    if (JSON.stringify(head) !== JSON.stringify(full)) differ.push(`${path}: ${JSON.stringify(head)} vs ${JSON.stringify(full)}`);
    // the search text from the leaves (no parser) is the full parse's, in search form
    const searchText = leavesSearchText(raw, simpleLeaves(raw)!);
    const fullText = searchTextOf(email);
    if (searchText !== fullText) {
      let at = 0;
      while (searchText[at] === fullText[at]) at++;
      searchDiffer.push(`${path} at ${at} of ${fullText.length}:\n  fast ${JSON.stringify(searchText.slice(Math.max(0, at - 40), at + 60))}\n  full ${JSON.stringify(fullText.slice(Math.max(0, at - 40), at + 60))}`);
    }
    assert.deepEqual(await summarize(raw, LIMITS).then(({ raw: _r, ...s }) => s), quick);
  }
  t.diagnostic(`fast path: ${fast} of ${all.length} messages`);
  assert.deepEqual(differ, []);
  assert.deepEqual(searchDiffer, []);
  return fast;
}

test('fast summary = full parse (search text included) on every fixture message (as received over SMTP)', async (t) => {
  const all = files(FIXTURES);
  assert.ok(all.length >= 50, `${all.length} fixture messages`);
  assert.ok((await sameAsFullParse(all, t)) > 0, 'some fixture takes the fast path');
});

test('fast summary = full parse (search text included) on every shared-corpus and fixture message (as received over SMTP)', { skip: corpusMissing ?? false }, async (t) => {
  const all = [...files(CORPUS), ...files(FIXTURES)];
  assert.ok(all.length >= 222, `${all.length} messages`);
  const fast = await sameAsFullParse(all, t);
  assert.ok(fast > 60, `the fast path serves the plain majority (${fast} of ${all.length})`);
});

test('fast summary = full parse on header lines the byte scan must read as the full parse does (folds, case, look-alike names, the removed mark elsewhere)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-summary-'));
  try {
    const messages = {
      // the mark this service writes into a cut part's Content-Description, here only in a Subject: nothing was cut
      'mark-in-subject.eml': `From: a@example.org\r\nSubject: ${REMOVED_MARK}\r\nContent-Type: text/plain\r\n\r\nbody one\r\n`,
      // Content-Type folded, in capitals, after look-alike fields that are not it
      'folded.eml': 'From: a@example.org\r\nX-Content-Type: image/png\r\nContent-Typed: image/png\r\nCONTENT-TYPE:\r\n multipart/alternative;\r\n\tboundary="b1"\r\n\r\n--b1\r\nContent-Type: text/plain;\r\n charset=utf-8\r\n\r\nplain\r\n--b1\r\ncontent-type: text/html\r\n\r\n<p>html</p>\r\n--b1--\r\n',
      // an attachment whose Content-Disposition is folded onto its own continuation line
      'folded-disposition.eml': 'From: a@example.org\r\nContent-Type: multipart/mixed; boundary=b2\r\n\r\n--b2\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b2\r\nContent-Type: application/pdf\r\nContent-Disposition:\r\n attachment; filename=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b2--\r\n',
    };
    const paths = Object.entries(messages).map(([name, text]) => {
      const p = join(dir, name);
      writeFileSync(p, text, 'latin1');
      return p;
    });
    assert.equal(await sameAsFullParse(paths, t), paths.length, 'each takes the fast path');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
