// The HTML check's CSS bound (issue 35 finding 4): caniemail's cost grows faster than the CSS it is
// given (128 KiB of `@media` blocks cost 22 s of CPU), so the check looks at a bounded part of the
// CSS and says `truncated` when it left some out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkHtml } from '../../src/domain/html-check-run.ts';
import { boundCss, HTML_CHECK_CSS, HTML_CHECK_INLINE_CSS_CHARS, HTML_CHECK_MAX_CHARS } from '../../src/domain/html-check.ts';
import { cpuMs } from '../helpers/time.ts';

/** `chars` characters of CSS: one `@media` block after another, the same selector in each (caniemail is quadratic on it). */
const mediaBlocks = (chars: number) => {
  let css = '';
  for (let i = 0; css.length < chars; i++) css += `@media (max-width:${i}px){.c{color:red}}`;
  return css;
};

test('128 KiB of @media blocks: the check costs under 300 ms of CPU, finds @media and says it was cut', () => {
  const html = `<html><head><style>${mediaBlocks(HTML_CHECK_MAX_CHARS - 100)}</style></head><body><p>x</p></body></html>`;
  assert.ok(html.length <= HTML_CHECK_MAX_CHARS);
  checkHtml('<p style="display:flex">warm</p>', false); // the data loaded and the code compiled before the measure
  const { value: check, ms } = cpuMs(() => checkHtml(html, false));
  // bound: the behaviour under test (before the bound: seconds of CPU); CPU time, so other load does not stretch it
  assert.ok(ms < 300, `${ms.toFixed(0)} ms of CPU`);
  assert.equal(check.error, null);
  assert.equal(check.truncated, true, 'the check says that part of the CSS was left out');
  const names = new Set(check.features.map((f) => f.feature));
  assert.ok(names.has('@media') && names.has('<style> element'), [...names].join(', '));
});

test('a whole rule is kept or left out: later style elements are emptied, the CSS still parses', () => {
  const css = mediaBlocks(HTML_CHECK_CSS.maxChars * 2);
  const { html, cut } = boundCss(`<style type="text/css">${css}</style><p>a</p><style>.later{color:red}</style>`);
  assert.equal(cut, true);
  const [first, second] = [...html.matchAll(/<style[^>]*>([\s\S]*?)<\/style>/g)].map((m) => m[1]);
  assert.ok(first.length <= HTML_CHECK_CSS.maxChars, `${first.length} characters kept`);
  assert.equal(first.match(/@media/g)?.length, HTML_CHECK_CSS.maxAtRules, 'as many @media blocks as the bound');
  assert.ok(css.startsWith(first) && first.endsWith('}}'), 'cut after a whole @media block');
  assert.equal(second, '');
  assert.match(html, /<p>a<\/p>/, 'the HTML around stays');
});

test('rules and at-rules are counted as well as characters; braces in strings are not rules', () => {
  const many = '.a{}'.repeat(HTML_CHECK_CSS.maxRules + 1);
  assert.ok(many.length < HTML_CHECK_CSS.maxChars);
  assert.equal(boundCss(`<style>${many}</style>`).cut, true);
  const imports = '@import url(x.css);'.repeat(HTML_CHECK_CSS.maxAtRules + 1);
  assert.ok(imports.length < HTML_CHECK_CSS.maxChars);
  const cutImports = boundCss(`<style>${imports}</style>`);
  assert.equal(cutImports.cut, true);
  assert.match(cutImports.html, /^<style>(@import url\(x\.css\);)+<\/style>$/, 'cut after a whole statement');
  const quoted = `.a::after{content:"${'{'.repeat(HTML_CHECK_CSS.maxRules + 10)}"}`;
  assert.deepEqual(boundCss(`<style>${quoted}</style>`), { html: `<style>${quoted}</style>`, cut: false });
});

test('inline style attributes past their bound are left out; ordinary mail is left whole', () => {
  const attrs = '<p style="display:flex;color:red">x</p>'.repeat(Math.ceil(HTML_CHECK_INLINE_CSS_CHARS / 20));
  const { html, cut } = boundCss(attrs);
  assert.equal(cut, true);
  const kept = [...html.matchAll(/style="([^"]*)"/g)].reduce((n, m) => n + m[1].length + 2, 0);
  assert.ok(kept <= HTML_CHECK_INLINE_CSS_CHARS, `${kept} characters of inline CSS kept`);
  assert.match(html, /<p>x<\/p>$/, 'the elements stay, without their style');
  const newsletter = '<html><head><style>.row{display:flex}@media (max-width:600px){.row{display:block}}</style></head><body><div class="row" style="display:flex">x</div></body></html>';
  assert.deepEqual(boundCss(newsletter), { html: newsletter, cut: false });
  assert.equal(checkHtml(newsletter, false).truncated, false);
});
