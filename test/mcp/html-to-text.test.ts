// htmlToText (src/domain/html.ts), the HTML → text conversion behind read_email's body (spec:
// read_email body rule 2): a table of inputs and the exact text an agent gets.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hiddenClasses, htmlToText } from '../../src/domain/html.ts';

describe('htmlToText', () => {
  const cases: [string, string, string][] = [
    ['links as label (url)', '<p>Please <a href="https://ex.com/verify?t=1">verify your account</a>.</p>', 'Please verify your account (https://ex.com/verify?t=1).'],
    ['a link whose text is its URL is shown once', '<a href="https://ex.com">https://ex.com</a>', 'https://ex.com'],
    ['an image link keeps its alt text as label', '<a href="https://ex.com/go"><img src="b.png" alt="Confirm email"></a>', 'Confirm email (https://ex.com/go)'],
    ['images without alt vanish', '<p>a<img src="pixel.gif">b</p>', 'ab'],
    ['scripts, styles, head and comments are dropped', '<head><title>T</title><style>p{color:red}</style></head><body><!-- secret --><script>x()</script><p>ok</p></body>', 'ok'],
    ['noscript, template, svg, form controls are dropped', '<noscript>n</noscript><template>t</template><svg><text>s</text></svg><textarea>ta</textarea><select><option>o</option></select><p>ok</p>', 'ok'],
    ['hidden attribute (as stored: hidden="hidden") and aria-hidden', '<p hidden="hidden">h</p><p hidden>h2</p><p aria-hidden="true">a</p><p>ok</p>', 'ok'],
    ['inline hiding styles', '<span style="display:none">p</span><div style="visibility:hidden">v</div><div style="mso-hide:all">m</div><div style="font-size:0">f</div><div style="font-size:1px">f1</div><div style="opacity:0">o</div><div style="color:transparent">c</div><div style="max-height:0;overflow:hidden">mh</div><p>ok</p>', 'ok'],
    ['visible styles are kept', '<div style="font-size:10px">ten</div><div style="opacity:0.5">half</div><div style="max-height:0px">mh</div>', 'ten\nhalf\nmh'],
    ['a class hidden by a top-level style rule', '<style>.preheader{display:none}</style><span class="x preheader">pre</span><p>ok</p>', 'ok'],
    ['a class hidden only inside @media stays', '<style>@media (max-width:600px){.wide{display:none}}</style><p class="wide">wide</p>', 'wide'],
    ['table cells are separated', '<table><tr><td>A</td><td>B</td></tr><tr><td>C</td><td>D</td></tr></table>', 'A B\nC D'],
    ['headings keep their case', '<h1>Welcome aboard</h1><p>x</p>', 'Welcome aboard\n\nx'],
    ['non-breaking spaces and runs of blank lines collapse', '<p>a&nbsp;&nbsp;b</p><br><br><br><br><p>c</p>', 'a b\n\nc'],
  ];
  for (const [name, html, text] of cases) test(name, () => assert.equal(htmlToText(html), text));

  test('hiddenClasses reads only plain class selectors of top-level rules', () => {
    assert.deepEqual(
      [...hiddenClasses('<style>/* c */ .pre{display:none} @media (max-width:600px){.mob{display:none}} .a, div.b { font-size:0 } .c .d{display:none} .e{color:red}</style>')].sort(),
      ['a', 'b', 'pre'],
    );
  });

  test('deep or huge input stays bounded and does not throw', () => {
    const deep = '<div>'.repeat(5000) + 'x' + '</div>'.repeat(5000);
    assert.equal(typeof htmlToText(deep), 'string');
    const big = '<p>word </p>'.repeat(20_000);
    assert.ok(htmlToText(big).length > 0);
  });
});
