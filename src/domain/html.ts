// Email HTML rules: the allow-list sanitizer behind `html_body` and the HTML→text conversion behind
// the tool endpoint's `body`. Email HTML is hostile; both are pure functions of their input.
import sanitizeHtml from 'sanitize-html';
import { compile } from 'html-to-text';

const TAGS = [
  'a', 'abbr', 'address', 'article', 'aside', 'b', 'bdi', 'bdo', 'big', 'blockquote', 'body', 'br', 'caption', 'center',
  'cite', 'code', 'col', 'colgroup', 'dd', 'del', 'details', 'dfn', 'div', 'dl', 'dt', 'em', 'figcaption', 'figure',
  'font', 'footer', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'head', 'header', 'hr', 'html', 'i', 'img', 'ins', 'kbd', 'li',
  'main', 'mark', 'nav', 'ol', 'p', 'pre', 'q', 's', 'samp', 'section', 'small', 'span', 'strike', 'strong', 'style',
  'sub', 'summary', 'sup', 'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'time', 'title', 'tr', 'tt', 'u', 'ul', 'var', 'wbr',
];
const COMMON_ATTRS = ['aria-hidden', 'hidden', 'align', 'bgcolor', 'border', 'class', 'color', 'dir', 'height', 'id', 'lang', 'style', 'title', 'valign', 'width'];

const SANITIZE: sanitizeHtml.IOptions & { allowedEmptyAttributes: string[] } = {
  // boolean `hidden` and empty `alt` carry meaning (hidden text must stay recognisable for read_email)
  allowedEmptyAttributes: ['hidden', 'alt'],
  allowedTags: TAGS,
  allowedAttributes: {
    '*': COMMON_ATTRS,
    a: ['href', 'name', 'target'],
    img: ['src', 'alt', 'width', 'height'],
    font: ['face', 'size', 'color'],
    table: ['cellpadding', 'cellspacing', 'summary'],
    td: ['colspan', 'rowspan', 'nowrap'],
    th: ['colspan', 'rowspan', 'nowrap', 'scope'],
    col: ['span'],
    colgroup: ['span'],
    ol: ['start', 'type'],
    time: ['datetime'],
  },
  // javascript:, vbscript:, data: (outside images) and every other scheme are dropped
  allowedSchemes: ['http', 'https', 'mailto', 'tel'],
  allowedSchemesByTag: { img: ['http', 'https', 'cid', 'data'] },
  allowedSchemesAppliedToAttributes: ['href', 'src', 'cite', 'action', 'background'],
  allowProtocolRelative: true,
  // script, iframe, object, embed, form, svg, math, noscript, template, textarea...: removed with their content
  nonTextTags: ['script', 'textarea', 'option', 'noscript', 'iframe', 'object', 'embed', 'svg', 'math', 'template', 'xmp', 'noembed', 'noframes', 'plaintext'],
  disallowedTagsMode: 'discard',
  // <style> is kept for layout; the browser view renders it in a sandboxed, CSP-locked frame
  allowVulnerableTags: true,
  // a stylesheet that could run code in any engine is dropped whole (sanitize-html passes <style>
  // text through raw, so it is checked here and cleaned of markup by cleanStyleText below)
  exclusiveFilter: (frame) => frame.tag === 'style' && isScriptCss(frame.text),
  transformTags: {
    '*': (tagName, attribs) => {
      const out = { ...attribs };
      if (out.style !== undefined && isScriptCss(out.style)) delete out.style;
      if (tagName === 'a') out.rel = 'noopener noreferrer nofollow';
      return { tagName, attribs: out };
    },
  },
  enforceHtmlBoundary: false,
  parseStyleAttributes: false,
};
(SANITIZE.allowedAttributes as Record<string, string[]>).a.push('rel');

/** Whitespace, controls and invisible characters a browser skips inside CSS tokens and URL schemes. */
const SQUASH_RE = /[\u0000-\u0020\u007f-\u009f\u200b-\u200f\u2028\u2029\ufeff]+/g;

/**
 * CSS that can run code in some engine: expression(), javascript:/vbscript: URLs, behaviors and
 * bindings. CSS escapes (`\73`), comments and whitespace are undone before looking.
 */
export function isScriptCss(css: string): boolean {
  const plain = css
    .replace(/\\([0-9a-f]{1,6})\s?/gi, (_, h: string) => {
      const cp = Number.parseInt(h, 16);
      return cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd';
    })
    .replace(/\\(.)/gs, '$1')
    .replace(/\/\*.*?(?:\*\/|$)/gs, '')
    .replace(SQUASH_RE, '');
  return /expression\(|javascript:|vbscript:|livescript:|behavior:|-moz-binding/i.test(plain);
}

/**
 * <style> text never holds markup: CSS ignores the `<!--`/`-->` wrappers old mail puts around it, and
 * any other `<` is removed, so no parser can read a tag (or a closing `</style`) inside it.
 */
const cleanStyleText = (html: string) =>
  mapStyleBlocks(html, (css) => css.replace(/<!--|-->/g, '').replace(/</g, ''));

/**
 * Each `<style …>…</style>` block's text through `fn`, the rest as is. One forward pass with indexOf
 * (a lazy regex over an unclosed `<style>` rescans to the end once per opener: quadratic).
 */
function mapStyleBlocks(html: string, fn: (css: string) => string): string {
  const lower = html.toLowerCase();
  let out = '';
  let at = 0;
  for (;;) {
    const open = lower.indexOf('<style', at);
    if (open < 0) break;
    const next = lower.charCodeAt(open + 6);
    const gt = lower.indexOf('>', open);
    if (gt < 0) break;
    if (!(next === 0x3e || next === 0x20 || next === 0x09 || next === 0x0a || next === 0x0d || next === 0x2f)) {
      out += html.slice(at, open + 6);
      at = open + 6;
      continue;
    }
    const close = lower.indexOf('</style', gt + 1);
    if (close < 0) break; // an unclosed block: left as is (nothing after it is style text)
    out += html.slice(at, gt + 1) + fn(html.slice(gt + 1, close));
    at = close;
  }
  return out + html.slice(at);
}

/** The text of each top-level `<style>` block, in one forward pass. */
function styleTexts(html: string): string[] {
  const out: string[] = [];
  mapStyleBlocks(html, (css) => {
    out.push(css);
    return '';
  });
  return out;
}

const sanitizePass = (html: string) => cleanStyleText(sanitizeHtml(html, SANITIZE));

/**
 * Start tags kept in an email's HTML. The parser (htmlparser2) keeps its open-element stack with
 * `unshift`, so its cost grows with the square of the nesting depth: 100,000 unclosed `<div>`s took
 * over 10 s. Real mail has a few thousand tags (Gmail clips a message at 102 KB); past this many
 * the rest of the HTML is cut.
 */
export const MAX_HTML_START_TAGS = 20_000;

/**
 * Characters of HTML the sanitizer is given: past it the rest is cut (a derivation has a time budget
 * too, but most mail is far below: Gmail clips a message at 102 KB).
 */
export const MAX_HTML_CHARS = 2_000_000;

/**
 * The HTML up to (not including) its `max`+1-th start tag or its `max`+1-th end tag, whichever
 * comes first: unmatched end tags make the parser quadratic too (1.5 MB of `</div>` took 6.5 s).
 * Sanitized HTML has no more end tags than start tags, so a second pass cuts nothing. Linear time.
 */
export function capStartTags(html: string, max: number): string {
  const re = /<(\/?)[a-z]/gi;
  let starts = 0;
  let ends = 0;
  for (let m = re.exec(html); m; m = re.exec(html)) {
    if (m[1] ? ++ends > max : ++starts > max) return html.slice(0, m.index);
  }
  return html;
}

/**
 * The allow-list sanitizer behind `html_body`: no script, embeddable or form elements, no on*
 * attributes, no javascript: URLs, no script-capable CSS. Idempotent: the parser closes elements
 * differently once discarded ones are gone, so the pass is repeated until the output is stable.
 */
export function sanitizeEmailHtml(html: string): string {
  // NUL is never valid in HTML and some parsers treat it as a tag-name terminator
  const capped = html.length > MAX_HTML_CHARS ? html.slice(0, MAX_HTML_CHARS) : html;
  let out = sanitizePass(capStartTags(capped.replace(/\u0000/g, ''), MAX_HTML_START_TAGS));
  for (let i = 0; i < 4; i++) {
    const again = sanitizePass(out);
    if (again === out) break;
    out = again;
  }
  return out;
}

/** Declarations of one style looked at: a longer style attribute is judged by its start. */
const MAX_STYLE_CHARS = 8192;
const ZERO_LENGTH = /^0(?:\.0+)?(?:px|em|rem|%)?$/;
const TINY_FONT = /^[01](?:\.0+)?(?:px|pt|em|rem|%)?$/;

/**
 * Whether inline style hides an element from a reader: display:none, visibility:hidden, mso-hide:all,
 * zero (or 1px) font size, zero max-height/height with overflow hidden, zero opacity, transparent
 * text, a zero clip. Declaration by declaration, no regex over the whole text (the lookahead this
 * replaces was quadratic: a 144 KB style froze the process for 2.6 s).
 */
export function isHiddenStyle(style: string): boolean {
  const text = style.length > MAX_STYLE_CHARS ? style.slice(0, MAX_STYLE_CHARS) : style;
  let zeroHeight = false;
  let overflowHidden = false;
  for (const decl of text.split(';')) {
    const colon = decl.indexOf(':');
    if (colon < 0) continue;
    const prop = decl.slice(0, colon).trim().toLowerCase();
    let value = decl.slice(colon + 1).trim().toLowerCase();
    if (value.endsWith('!important')) value = value.slice(0, -'!important'.length).trimEnd();
    switch (prop) {
      case 'display':
        if (value === 'none') return true;
        break;
      case 'visibility':
        if (value === 'hidden' || value === 'collapse') return true;
        break;
      case 'mso-hide':
        if (value === 'all') return true;
        break;
      case 'height':
      case 'max-height':
        if (ZERO_LENGTH.test(value)) zeroHeight = true;
        break;
      case 'overflow':
        if (value === 'hidden') overflowHidden = true;
        break;
      case 'font-size':
        if (TINY_FONT.test(value)) return true;
        break;
      case 'opacity':
        if (value === '' || /^0?(?:\.0+)?$/.test(value)) return true;
        break;
      case 'color':
        if (value.startsWith('transparent')) return true;
        break;
      case 'clip':
        if (/^rect\(\s*0/.test(value)) return true;
        break;
      default:
    }
  }
  return zeroHeight && overflowHidden;
}

/** Elements whose content is never text a reader sees. */
const NON_TEXT = new Set(['script', 'style', 'noscript', 'template', 'head', 'title', 'textarea', 'option', 'select', 'iframe', 'object', 'embed', 'svg', 'math', 'xmp', 'noembed', 'noframes', 'button', 'input', 'meta', 'link', 'base']);

/**
 * Class names that a top-level `<style>` rule hides (`.preheader { display: none }`). Only plain
 * class selectors outside @-blocks count: a rule inside `@media` hides content only on some screens.
 */
export function hiddenClasses(html: string): Set<string> {
  const out = new Set<string>();
  for (const text of styleTexts(html)) {
    const css = stripCssComments(text);
    let depth = 0;
    let start = 0;
    let atBlock = 0; // depth at which an @-block opened, 0 when none
    let selector = '';
    for (let i = 0; i < css.length; i++) {
      const c = css[i];
      if (c === '{') {
        const head = css.slice(start, i).trim();
        depth++;
        if (head.startsWith('@')) {
          if (atBlock === 0) atBlock = depth;
        } else if (atBlock === 0 && depth === 1) {
          selector = head;
        }
        start = i + 1;
      } else if (c === '}') {
        if (depth === 1 && atBlock === 0 && selector) {
          const body = css.slice(start, i);
          if (isHiddenStyle(body)) {
            for (const sel of selector.split(',')) {
              const cls = /^\s*(?:[a-z][a-z0-9]*)?\.([\w-]+)\s*$/i.exec(sel);
              if (cls) out.add(cls[1].toLowerCase());
            }
          }
        }
        if (depth === atBlock) atBlock = 0;
        depth = Math.max(0, depth - 1);
        selector = '';
        start = i + 1;
      }
    }
  }
  return out;
}

/** CSS without its comments, in one pass (an unclosed comment runs to the end). */
function stripCssComments(css: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const open = css.indexOf('/*', at);
    if (open < 0) return out + css.slice(at);
    out += css.slice(at, open);
    const close = css.indexOf('*/', open + 2);
    if (close < 0) return out;
    at = close + 2;
  }
}

/** Removes elements a reader would not see (and everything inside them), before text conversion. */
function dropHidden(html: string): string {
  const classes = hiddenClasses(html);
  const options: sanitizeHtml.IOptions & { allowedEmptyAttributes: string[] } = {
    allowedTags: false,
    allowedAttributes: false,
    // boolean attributes (`hidden`) have empty values, which sanitize-html drops unless listed
    allowedEmptyAttributes: ['hidden', 'alt', 'aria-hidden'],
    allowVulnerableTags: true,
    exclusiveFilter: (frame) => {
      if (NON_TEXT.has(frame.tag)) return true;
      const a = frame.attribs ?? {};
      if ('hidden' in a || String(a['aria-hidden']).toLowerCase() === 'true') return true;
      if (a.style && isHiddenStyle(a.style)) return true;
      if (classes.size > 0 && a.class) return a.class.toLowerCase().split(/\s+/).some((c) => classes.has(c));
      return false;
    },
  };
  return sanitizeHtml(html.replace(/\u0000/g, ''), options);
}

/** How html-to-text is configured here: links as `label (url)`, images as their alt text, table cells separated by spaces, headings as written. */
const CONVERT: Parameters<typeof compile>[0] = {
  wordwrap: false,
  limits: { maxInputLength: 2_000_000, maxDepth: 200 },
  formatters: {
    altText: (elem, _walk, builder) => {
      const alt = String(elem.attribs?.alt ?? '').trim();
      if (alt) builder.addInline(alt);
    },
  },
  selectors: [
    { selector: 'a', options: { linkBrackets: ['(', ')'], hideLinkHrefIfSameAsText: true, ignoreHref: false, noAnchorUrl: true } },
    { selector: 'img', format: 'altText' },
    { selector: 'h1', options: { uppercase: false } },
    { selector: 'h2', options: { uppercase: false } },
    { selector: 'h3', options: { uppercase: false } },
    { selector: 'h4', options: { uppercase: false } },
    { selector: 'h5', options: { uppercase: false } },
    { selector: 'h6', options: { uppercase: false } },
    { selector: 'table', format: 'block' },
    { selector: 'tr', format: 'block', options: { leadingLineBreaks: 1, trailingLineBreaks: 1 } },
    { selector: 'td', format: 'inlineSurround', options: { prefix: ' ', suffix: ' ' } },
    { selector: 'th', format: 'inlineSurround', options: { prefix: ' ', suffix: ' ' } },
  ],
};

/** html-to-text as this service configures it (CONVERT), compiled once: its options are read and its selectors built here, not on every call. */
const convertHtml = compile(CONVERT);

/**
 * The same converter for words (htmlWords): link targets left out (only what a reader sees), and
 * elements whose content is never text skipped by the converter itself instead of a pass of their own.
 */
const convertWords = compile({
  ...CONVERT,
  selectors: [
    ...CONVERT.selectors!.map((s) => (s.selector === 'a' ? { selector: 'a', options: { ignoreHref: true } } : s)),
    ...[...NON_TEXT].map((selector) => ({ selector, format: 'skip' })),
  ],
});

/** HTML prefixes tried before the whole when a caller needs only so much text. */
const HTML_PREFIXES = [200_000, 1_000_000];

/**
 * HTML → plain text for readers, the one conversion (html-to-text, configured once above): scripts,
 * styles, comments and hidden elements (inline styles, `hidden`, `aria-hidden`, classes hidden by a
 * top-level `<style>` rule) dropped.
 *
 * `enough`: a caller that keeps only this many characters (read_email's body) gets the text of the
 * shortest prefix of HTML_PREFIXES that yields more, else of the whole (a newsletter of several MB
 * costs seconds to convert whole). Text is produced in document order, so the characters kept never
 * depend on where the prefix was cut; an element left open by the cut (a hidden block, say) only
 * shortens the text, and then a longer prefix is tried.
 */
export function htmlToText(html: string, enough = Infinity): string {
  for (const n of HTML_PREFIXES) {
    if (html.length <= n || !Number.isFinite(enough)) break;
    const text = wholeToText(html.slice(0, n));
    if (text.length > enough) return text;
  }
  return wholeToText(html);
}

function wholeToText(html: string): string {
  return tidy(convertHtml(dropHidden(html)));
}

/**
 * HTML's words, cheaply: the one converter without the hidden-element pass (a parse of its own
 * through sanitize-html, most of htmlToText's cost) and without link targets; start tags capped like
 * the sanitizer's input (the parser is quadratic in nesting depth), NUL dropped. For text that is
 * searched or scanned, not read: the search text (derive/search-text.ts), the codes of an HTML part
 * whose text part is the body, and the text body of an HTML-only message whose HTML budget ran out.
 */
export function htmlWords(html: string): string {
  const capped = html.length > MAX_HTML_CHARS ? html.slice(0, MAX_HTML_CHARS) : html;
  return tidy(convertWords(capStartTags(capped.replace(/\u0000/g, ''), MAX_HTML_START_TAGS)));
}

/** Converted text tidied: no-break spaces as spaces, runs of spaces as one, no blank runs past one line. */
function tidy(text: string): string {
  return text
    .replace(/\u00a0/g, ' ')
    .replace(/[ \t]{2,}/g, ' ')
    .replace(/^[ \t]+|[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
