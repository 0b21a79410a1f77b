// The html_body sanitizer under attack: property-based tests with fast-check and a
// corpus of known mXSS vectors. The output is checked by parsing it (htmlparser2), and the corpus
// also in a real browser (Chromium through playwright-core) when one is installed, since mXSS lives
// in the differences between parsers.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { parseDocument } from 'htmlparser2';
import { MAX_HTML_START_TAGS, sanitizeEmailHtml } from '../../src/domain/html.ts';
import { cpuMs } from '../helpers/time.ts';

type Node = { type: string; name?: string; attribs?: Record<string, string>; children?: Node[]; data?: string };

const FORBIDDEN_TAGS = new Set(['script', 'iframe', 'object', 'embed', 'form', 'base', 'meta', 'link', 'svg', 'math', 'noscript', 'template', 'frame', 'frameset', 'applet', 'input', 'button', 'textarea', 'select', 'option', 'xmp', 'plaintext', 'noembed', 'noframes']);
const URL_ATTRS = new Set(['href', 'src', 'action', 'formaction', 'background', 'cite', 'poster', 'xlink:href', 'data', 'srcset', 'lowsrc', 'dynsrc', 'ping', 'longdesc', 'usemap', 'codebase']);
const SQUASH = /[\u0000-\u0020\u007f-\u009f\u200b-\u200f\u2028\u2029\ufeff]+/g;

/** Scheme check the way a browser reads a URL attribute: controls and whitespace ignored, any case. */
export const isScriptUrl = (v: string) => /^(?:javascript|vbscript|livescript|data:text\/html)/i.test(v.replace(SQUASH, ''));
/** CSS that runs code in some engine: expression(), javascript: in url(), behaviors, bindings (CSS escapes decoded). */
const isScriptCss = (v: string) =>
  /expression\(|javascript:|vbscript:|behavior:|-moz-binding/i.test(
    v.replace(/\\([0-9a-f]{1,6})\s?/gi, (_, h) => String.fromCodePoint(Number.parseInt(h, 16) || 0xfffd)).replace(/\\(.)/g, '$1').replace(/\/\*.*?\*\//gs, '').replace(SQUASH, ''),
  );

/** Every reason the sanitized output is unsafe, as read by htmlparser2 (empty: safe). */
function violations(html: string): string[] {
  const out: string[] = [];
  const walk = (n: Node) => {
    if (n.type === 'script') out.push('script element');
    if (n.name) {
      const name = n.name.toLowerCase();
      const local = name.includes(':') ? name.split(':').pop()! : name;
      if (FORBIDDEN_TAGS.has(local)) out.push(`<${name}> element`);
      if (n.type === 'style' || local === 'style') {
        const text = (n.children ?? []).map((c) => c.data ?? '').join('');
        if (isScriptCss(text)) out.push('script in a <style> element');
      }
      for (const [k, v] of Object.entries(n.attribs ?? {})) {
        const key = k.toLowerCase();
        if (key.startsWith('on')) out.push(`on* attribute ${key}`);
        if ((URL_ATTRS.has(key) || key.endsWith(':href')) && isScriptUrl(v)) out.push(`${key}=${JSON.stringify(v)}`);
        if (key === 'style' && isScriptCss(v)) out.push(`style=${JSON.stringify(v)}`);
        if (key === 'srcdoc' || key === 'http-equiv') out.push(`${key} attribute`);
      }
    }
    for (const c of n.children ?? []) walk(c);
  };
  walk(parseDocument(html, { decodeEntities: true }) as unknown as Node);
  return out;
}

/** Known mXSS and filter-evasion vectors (PortSwigger, Cure53 DOMPurify test suite, OWASP cheat sheet). */
export const CORPUS: string[] = [
  // SVG / MathML namespace confusion
  '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">',
  '<svg><p><style><a id="</style><img src=1 onerror=alert(1)>"></p></svg>',
  '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;/mglyph&gt;&lt;img&Tab;src=1&Tab;onerror=alert(1)&gt;">',
  '<math><mtext><h1><a><h6></a></h6><mglyph><svg><mtext><style><a title="</style><img src onerror=alert(1)>"></style></h1>',
  '<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>',
  '<svg><foreignObject><p><style><img src=x onerror=alert(1)></style></p></foreignObject></svg>',
  '<math><annotation-xml encoding="text/html"><style><img src=x onerror=alert(1)></style></annotation-xml></math>',
  '<svg><script>alert(1)</script></svg>',
  '<svg><a xlink:href="javascript:alert(1)"><text x="20" y="20">x</text></a></svg>',
  '<svg><animate onbegin=alert(1) attributeName=x dur=1s>',
  '<svg><set attributeName="href" to="javascript:alert(1)"/></svg>',
  '<svg/onload=alert(1)>',
  '<math href="javascript:alert(1)">click</math>',
  '<svg><style>&lt;img src=x onerror=alert(1)&gt;</style></svg>',
  // <noscript>, <template>, raw-text elements
  '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
  '<noscript><style></noscript><img src=x onerror=alert(1)></style></noscript>',
  '<template><img src=x onerror=alert(1)></template>',
  '<xmp><p title="</xmp><img src=x onerror=alert(1)>"></xmp>',
  '<noembed><img title="</noembed><img src=x onerror=alert(1)>"></noembed>',
  '<noframes><img title="</noframes><img src=x onerror=alert(1)>"></noframes>',
  '<textarea><img title="</textarea><img src=x onerror=alert(1)>"></textarea>',
  '<title><img title="</title><img src=x onerror=alert(1)>"></title>',
  '<iframe><img title="</iframe><img src=x onerror=alert(1)>"></iframe>',
  '<plaintext><img src=x onerror=alert(1)>',
  '<select><template><style><img src=x onerror=alert(1)></style></template></select>',
  // <style> breakouts
  '<style></style><img src=x onerror=alert(1)>',
  '<style><img src="</style><img src=x onerror=alert(1)//">',
  '<style>@import "javascript:alert(1)";</style>',
  '<style>body{background:url("javascript:alert(1)")}</style>',
  '<style>body{background:url(java\\73 cript:alert(1))}</style>',
  '<style>*{x:expression(alert(1))}</style>',
  '<style>li{behavior:url(x.htc)}</style>',
  '<style>a{-moz-binding:url(x.xml#xss)}</style>',
  '<style/><img src=x onerror=alert(1)>',
  '<STYLE>body{}</STYLE ><img src=x onerror=alert(1)>',
  '<div style="background:url(javascript:alert(1))">a</div>',
  '<div style="background:url(&quot;javascript:alert(1)&quot;)">a</div>',
  '<div style="width: expression(alert(1))">a</div>',
  '<div style="width: expr/**/ession(alert(1))">a</div>',
  '<div style="background:url(java\\09script:alert(1))">a</div>',
  '<div style="x:\\65 xpression(alert(1))">a</div>',
  // <base>, <meta refresh>, <link>
  '<base href="javascript:alert(1)//">',
  '<base href="https://evil.example/"><a href="/x">x</a>',
  '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
  '<meta http-equiv="refresh" content="0; URL=https://evil.example/">',
  '<meta charset="utf-7">+ADw-script+AD4-alert(1)+ADw-/script+AD4-',
  '<link rel="stylesheet" href="javascript:alert(1)">',
  '<link rel="import" href="https://evil.example/x.html">',
  // entity-encoded and obfuscated schemes
  '<a href="java&#x09;script:alert(1)">x</a>',
  '<a href="java&#x0A;script:alert(1)">x</a>',
  '<a href="java&#x0D;script:alert(1)">x</a>',
  '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">x</a>',
  '<a href="&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;&#x3A;alert(1)">x</a>',
  '<a href="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058alert(1)">x</a>',
  '<a href="jav&Tab;ascript:alert(1)">x</a>',
  '<a href="javascript&colon;alert(1)">x</a>',
  '<a href=" &#14; javascript:alert(1)">x</a>',
  '<a href="JaVaScRiPt:alert(1)">x</a>',
  '<a href="vbscript:msgbox(1)">x</a>',
  '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
  '<a href="\u0001javascript:alert(1)">x</a>',
  '<img src="javascript:alert(1)">',
  '<img src=`javascript:alert(1)`>',
  '<img """><script>alert(1)</script>">',
  '<img src=x onerror="alert(1)">',
  '<img src=x OnErRoR=alert(1)>',
  '<img src=x onerror\u000b=alert(1)>',
  '<img/src=x/onerror=alert(1)>',
  '<img src=x:alert(alt) onerror=eval(src) alt=0>',
  '<body onload=alert(1)>',
  '<a href="#" onclick="alert(1)">x</a>',
  '<div onmouseover="alert(1)" style="position:fixed;inset:0">x</div>',
  '<details open ontoggle=alert(1)>',
  '<video><source onerror=alert(1)></video>',
  '<object data="javascript:alert(1)"></object>',
  '<embed src="javascript:alert(1)">',
  '<form action="javascript:alert(1)"><button>x</button></form>',
  '<button formaction="javascript:alert(1)">x</button>',
  '<isindex action="javascript:alert(1)" type=submit>',
  '<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>',
  '<frameset><frame src="javascript:alert(1)"></frameset>',
  // comments, CDATA and parser confusion
  '<!--<img src="--><img src=x onerror=alert(1)//">',
  '<!-- --!><img src=x onerror=alert(1)> -->',
  '<![CDATA[><img src=x onerror=alert(1)>]]>',
  '<?xml version="1.0"?><img src=x onerror=alert(1)>',
  '<scr<script>ipt>alert(1)</scr</script>ipt>',
  '<<script>script>alert(1)<</script>/script>',
  '<script\u0000>alert(1)</script>',
  '<scr\u0000ipt>alert(1)</scr\u0000ipt>',
  '<a href="javas\u0000cript:alert(1)">x</a>',
  '<div id="x"></div><a/href="javascript:alert(1)">x</a>',
  '<table><td><style><img src=x onerror=alert(1)></style></td></table>',
  '<a title="&lt;img src=x onerror=alert(1)&gt;">x</a>',
  '<p title="</p><img src=x onerror=alert(1)>">',
  '<img src="x` `<script>alert(1)</script>"` `>',
  '<div><![endif]--><img src=x onerror=alert(1)></div>',
  '<!--[if gte IE 4]><script>alert(1)</script><![endif]-->',
];

const frag = fc.constantFrom(
  '<script>', '</script>', '<svg>', '</svg>', '<math>', '<mtext>', '<mglyph>', '<style>', '</style>', '<noscript>', '</noscript>',
  '<template>', '<title>', '</title>', '<textarea>', '<xmp>', '<iframe>', '<table>', '<td>', '<select>', '<option>', '<a ', '<img ',
  '<div ', '<p>', '</p>', '<base ', '<meta ', '<form>', '<object ', '<embed ', '<!--', '-->', '--!>', '<![CDATA[', ']]>', '<', '>', '/>',
  '"', "'", '`', '=', ' ', '\t', '\n', '\u0000', '&#x09;', '&#106;', '&colon;', '&lt;', '&gt;', '&quot;', '&amp;',
  'href=', 'src=', 'style=', 'onerror=', 'onload=', 'xlink:href=', 'formaction=', 'srcdoc=', 'http-equiv=refresh content=',
  'javascript:', 'java\tscript:', 'JaVaScRiPt:', 'vbscript:', 'data:text/html,', 'alert(1)', 'url(', 'expression(', ')', 'x',
);
const hostileHtml = fc.oneof(
  { weight: 4, arbitrary: fc.array(frag, { maxLength: 40 }).map((a) => a.join('')) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constantFrom(...CORPUS).chain((c) => fc.tuple(fc.constant(c), fc.array(frag, { maxLength: 10 })).map(([x, f]) => f.join('') + x + f.reverse().join(''))) },
);
const RUNS = Number(process.env.EPHEMAIL_FC_RUNS ?? 2000);

describe('sanitizeEmailHtml properties (fast-check)', () => {
  test('never throws and always returns a string', () => {
    fc.assert(fc.property(hostileHtml, (h) => typeof sanitizeEmailHtml(h) === 'string'), { numRuns: RUNS, seed: 6 });
  });

  test('is idempotent', () => {
    fc.assert(fc.property(hostileHtml, (h) => {
      const once = sanitizeEmailHtml(h);
      assert.equal(sanitizeEmailHtml(once), once);
    }), { numRuns: RUNS, seed: 66 });
  });

  test('output has no script element, no on* attribute, no javascript: URL (parsed)', () => {
    fc.assert(fc.property(hostileHtml, (h) => {
      const out = sanitizeEmailHtml(h);
      assert.deepEqual(violations(out), [], `${JSON.stringify(h)} → ${JSON.stringify(out)}`);
    }), { numRuns: RUNS, seed: 666 });
  });

  test('hostile structure is sanitized in bounded time: 200,000 unclosed elements, tag floods', () => {
    for (const html of ['<div>'.repeat(200_000), '<select><td>'.repeat(100_000), '<table><tr>' + '<td>'.repeat(100_000), '<'.repeat(500_000), '<a '.repeat(100_000)]) {
      const { value: out, ms } = cpuMs(() => sanitizeEmailHtml(html));
      // bound: linear on hostile markup (it is the behaviour); CPU time, so other load does not stretch it
      assert.ok(ms < 10_000, `${html.slice(0, 20)}… took ${ms.toFixed(0)} ms`);
      assert.equal(sanitizeEmailHtml(out), out, 'idempotent');
      assert.ok((out.match(/<[a-z]/gi) ?? []).length <= MAX_HTML_START_TAGS);
    }
  });

  test('ordinary email HTML survives (links, images, tables, inline style)', () => {
    const html = '<table width="600"><tr><td style="color:#333;font-family:Arial"><a href="https://x.example/verify?t=1&amp;u=2">Verify</a><img src="https://x.example/logo.png" alt="logo"></td></tr></table>';
    const out = sanitizeEmailHtml(html);
    assert.match(out, /<a href="https:\/\/x\.example\/verify\?t=1&amp;u=2"/);
    assert.match(out, /<img src="https:\/\/x\.example\/logo\.png" alt="logo"/);
    assert.match(out, /style="color:#333;font-family:Arial"/);
  });
});

describe('sanitizeEmailHtml mXSS corpus', () => {
  for (const vector of CORPUS) {
    test(`corpus: ${JSON.stringify(vector).slice(0, 90)}`, () => {
      const out = sanitizeEmailHtml(vector);
      assert.deepEqual(violations(out), [], JSON.stringify(out));
      assert.equal(sanitizeEmailHtml(out), out, 'idempotent');
    });
  }
});

// The same corpus (and a fast-check sample) read by a real HTML5 parser: assigned with innerHTML,
// serialized and assigned again (the mXSS round trip), then the live DOM is inspected.
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => existsSync(p));
describe('sanitizeEmailHtml in a real browser', { skip: CHROMIUM ? false : 'no Chromium installed' }, () => {
  let browser: import('playwright-core').Browser;
  let page: import('playwright-core').Page;
  before(async () => {
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage();
    await page.setContent('<!doctype html><html><body><div id="a"></div><div id="b"></div></body></html>');
    await page.evaluate(`window.fired = [];
      for (const k of ['alert', 'confirm', 'prompt']) window[k] = (...x) => window.fired.push(k + '(' + x.join(',') + ')');`);
  });
  after(async () => browser?.close());

  // Plain JavaScript run in the page (a string, so the TypeScript transform never touches it).
  const INSPECT = `async (list) => {
    const SQ = /[\\u0000-\\u0020\\u007f-\\u009f\\u200b-\\u200f\\u2028\\u2029\\ufeff]+/g;
    const bad = (v) => /^(?:javascript|vbscript|data:text\\/html)/i.test(v.replace(SQ, ''));
    const FORBIDDEN = ['script', 'iframe', 'object', 'embed', 'form', 'base', 'meta', 'link', 'svg', 'math', 'noscript', 'template', 'frame'];
    const res = [];
    const a = document.getElementById('a');
    const b = document.getElementById('b');
    for (let i = 0; i < list.length; i++) {
      const problems = [];
      a.innerHTML = list[i];
      b.innerHTML = a.innerHTML; // serialize and parse again: where mutation XSS appears
      for (const root of [a, b]) {
        for (const el of root.querySelectorAll('*')) {
          const tag = el.localName;
          if (FORBIDDEN.includes(tag)) problems.push('<' + tag + '> (' + el.namespaceURI + ')');
          for (const at of el.attributes) {
            if (/^on/i.test(at.name)) problems.push(tag + '[' + at.name + ']');
            if (/href|src|action|data|background|poster/i.test(at.name) && bad(at.value)) problems.push(tag + '[' + at.name + '=' + at.value + ']');
            if (at.name === 'srcdoc' || at.name === 'http-equiv') problems.push(tag + '[' + at.name + ']');
          }
        }
      }
      res.push({ i, problems });
    }
    await new Promise((r) => setTimeout(r, 200)); // quiet window: onerror/onload handlers that survived would fire in these 200 ms
    a.innerHTML = '';
    b.innerHTML = '';
    const fired = window.fired.splice(0);
    if (fired.length) res.push({ i: -1, problems: fired });
    return res;
  }`;

  async function inspect(outputs: string[]): Promise<{ i: number; problems: string[] }[]> {
    return page.evaluate(`(${INSPECT})(${JSON.stringify(outputs)})`) as Promise<{ i: number; problems: string[] }[]>;
  }

  test('the browser check itself sees an unsanitized vector (not vacuous)', async () => {
    const found = await inspect(['<img src=x onerror=alert(1)>', '<a href="java&#x09;script:alert(1)">x</a>']);
    assert.ok(found[0].problems.length > 0 && found[1].problems.length > 0, JSON.stringify(found));
    assert.ok(found.some((r) => r.i === -1 && r.problems.some((p) => p.startsWith('alert('))), 'the onerror handler ran and was seen');
  });

  test('no corpus vector survives a browser parse and re-parse', async () => {
    const outs = CORPUS.map((v) => sanitizeEmailHtml(v));
    const found = (await inspect(outs)).filter((r) => r.problems.length);
    assert.deepEqual(found.map((r) => ({ input: CORPUS[r.i] ?? 'script ran', output: outs[r.i], problems: r.problems })), []);
  });

  test('fast-check sample: nothing executable after a browser parse and re-parse', async () => {
    const samples = fc.sample(hostileHtml, { numRuns: 1500, seed: 6666 });
    const outs = samples.map((s) => sanitizeEmailHtml(s));
    const found = (await inspect(outs)).filter((r) => r.problems.length);
    assert.deepEqual(found.slice(0, 5).map((r) => ({ input: samples[r.i] ?? 'script ran', output: outs[r.i], problems: r.problems })), []);
  });
});
