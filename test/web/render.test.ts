// Pieces of the pages' HTML without a browser: `code` spans of the sender checks' text (escaped, an
// unpaired backtick kept as text), the frame's rule for blocked remote images (present only while
// they are blocked) and the email page's thumbnails (raster image attachments only, from the email's
// own image route).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { frameDocument } from '../../src/web/frame.ts';
import { emailPage, esc, withCode } from '../../src/web/pages.ts';

test('withCode: each closed pair of backticks is a <code> element, everything escaped, an unpaired backtick kept', () => {
  assert.equal(withCode('Only supports `display:none`.'), 'Only supports <code>display:none</code>.');
  assert.equal(withCode('not on `<img>` & co'), `not on <code>${esc('<img>')}</code> ${esc('&')} co`);
  assert.ok(!withCode('not on `<img>`').includes('<img'), 'markup in a code span stays text');
  assert.equal(withCode('<b>no code</b>'), esc('<b>no code</b>'));
  assert.equal(withCode('`a` and a lone ` <x>'), `<code>a</code> and a lone \` ${esc('<x>')}`);
  assert.equal(withCode('``'), '<code></code>');
});

test('the frame shrinks remote images only while they are blocked', () => {
  const e = { id: 'e', htmlBody: '<img src="https://cdn.example/hero.png" width="600" height="200">', attachments: [] } as any;
  assert.match(frameDocument(e), /img\[src\^="https:" i\][^{]*\{width:auto!important;height:auto!important/);
  assert.doesNotMatch(frameDocument(e, true), /img\[src\^="https:"/);
});

test('the email page: a thumbnail for each raster image attachment, from the email\'s own image route; none for SVG or PDF', () => {
  const att = (id: string, filename: string, contentType: string) => ({ id, filename, contentType, sizeBytes: 10, contentId: null });
  const e = {
    id: '0190-e', address: 'a@ephemail.test', subject: 's', sender: 'x@example.org', mailedBy: null, authentication: null, to: 'a@ephemail.test', cc: '',
    receivedAt: 0, expiresAt: 3_600_000, htmlBody: null, textBody: 't', headers: [], links: [], codes: [], spam: null, htmlCheck: null,
    attachments: [att('p1', 'photo.jpg', 'image/jpeg'), att('s1', 'evil.svg', 'image/svg+xml'), att('d1', 'terms.pdf', 'application/pdf')],
  } as any;
  const html = emailPage({ js: '/a.js', css: '/a.css' }, e);
  const thumbs = [...html.matchAll(/<img class="thumb" src="([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual(thumbs, ['/web/frames/0190-e/cid/p1']);
});
