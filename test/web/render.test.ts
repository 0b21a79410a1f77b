// Pieces of the pages' HTML without a browser: `code` spans of the sender checks' text (escaped, an
// unpaired backtick kept as text), the frame's rule for blocked remote images (present only while
// they are blocked) and the email page's thumbnails (raster image attachments only, from the email's
// own image route); the details follow the registry (derive/registry.ts): the language in words, a
// view the page has no words of its own for shown generically (escaped), none the registry keeps off the page.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { frameDocument } from '../../src/web/frame.ts';
import { EMAIL_VIEWS } from '../../src/derive/registry.ts';
import { emailPage, esc, languageName, OWN_PLACE, withCode, type PageView } from '../../src/web/pages.ts';

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

const ASSETS = { js: '/a.js', css: '/a.css' };
const email = (over: Record<string, unknown> = {}) => ({
  id: '0190-e', address: 'a@ephemail.test', subject: 's', sender: 'x@example.org', mailedBy: null, authentication: null, to: 'a@ephemail.test', cc: '',
  receivedAt: 0, expiresAt: 3_600_000, htmlBody: null, textBody: 't', headers: [], links: [], codes: [], spam: null, htmlCheck: null, attachments: [], language: null,
  ...over,
}) as any;
/** The details' rows as [label, value HTML]. */
const details = (html: string) => [...html.slice(html.indexOf('id="meta-more"')).matchAll(/<dt>(.*?)<\/dt><dd>(.*?)<\/dd>/g)].map((m) => [m[1], m[2]]);

test('the details name the language in English words with its code; the code alone when it has no name; no row when null', () => {
  assert.deepEqual(details(emailPage(ASSETS, email({ language: 'fr' }))).find(([l]) => l === 'Language'), ['Language', 'French (fr)']);
  assert.deepEqual(details(emailPage(ASSETS, email({ language: 'en' }))).find(([l]) => l === 'Language'), ['Language', 'English (en)']);
  assert.equal(details(emailPage(ASSETS, email())).find(([l]) => l === 'Language'), undefined);
  assert.equal(languageName('ceb'), 'Cebuano (ceb)');
  assert.equal(languageName('hms'), 'hms', 'a code without an English name');
  assert.equal(languageName('<b>'), '<b>', 'a malformed code is returned as it is (escaped where shown)');
  assert.doesNotMatch(emailPage(ASSETS, email({ language: '<b>x</b>' })), /<b>x<\/b>/, 'escaped');
});

test('a view the registry gives the page, without words of its own there, is a row of the details: its field and value, escaped', () => {
  const views: readonly PageView[] = [
    ...EMAIL_VIEWS,
    { name: 'mood', wire: { field: 'sender_mood', faces: ['http', 'page'], schema: {} } },
    { name: 'score', wire: { field: 'score', faces: ['page'], schema: {} } },
    { name: 'tags', wire: { field: 'tags', faces: ['page'], schema: {} } },
    { name: 'empty', wire: { field: 'empty', faces: ['page'], schema: {} } },
    { name: 'secret', wire: { field: 'secret', faces: ['http', 'mcp'], schema: {} } },
    { name: 'kept', wire: null },
  ];
  const e = email({ language: 'fr', mood: '<img src=x onerror=alert(1)>', score: 0, tags: [{ a: '<i>' }], empty: [], secret: 'no', kept: 'no' });
  const html = emailPage(ASSETS, e, views);
  const rows = details(html);
  assert.deepEqual(rows.slice(rows.findIndex(([l]) => l === 'Language')).slice(0, 4), [
    ['Language', 'French (fr)'],
    ['Sender mood', esc('<img src=x onerror=alert(1)>')],
    ['Score', '0'],
    ['Tags', `<code>${esc('[{"a":"<i>"}]')}</code>`],
  ]);
  assert.doesNotMatch(html, /<img src=x/);
  assert.ok(!rows.some(([l]) => /Empty|Secret|Kept/.test(l)), 'nothing for an empty value, a view off the page, or one on no face');
  assert.match(html, /Details <span class="muted">\(to, authentication, language, sender mood, score, tags, times\)/);
  // the shipped registry's page views: no generic row for any (each has a place or words of its own)
  const shipped = details(emailPage(ASSETS, email({ language: 'de' })));
  assert.deepEqual(shipped.map(([l]) => l), ['Authentication', 'To', 'Language', 'Received', 'Expires']);
});

test('the page\'s own places are for views the registry gives the page', () => {
  const page = new Set(EMAIL_VIEWS.filter((v) => v.wire?.faces.includes('page')).map((v) => v.name));
  for (const name of OWN_PLACE) assert.ok(page.has(name as never), `${name}: the page shows it, the registry does not give it the page`);
});
