// Email HTML rules: the allow-list sanitizer behind `html_body` and the HTML→text conversion behind
// the tool endpoint's `body`. Email HTML is hostile; both are pure functions of their input.
import sanitizeHtml from 'sanitize-html';
import { convert } from 'html-to-text';

const TAGS = [
  'a', 'abbr', 'address', 'article', 'aside', 'b', 'bdi', 'bdo', 'big', 'blockquote', 'body', 'br', 'caption', 'center',
  'cite', 'code', 'col', 'colgroup', 'dd', 'del', 'details', 'dfn', 'div', 'dl', 'dt', 'em', 'figcaption', 'figure',
  'font', 'footer', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'head', 'header', 'hr', 'html', 'i', 'img', 'ins', 'kbd', 'li',
  'main', 'mark', 'nav', 'ol', 'p', 'pre', 'q', 's', 'samp', 'section', 'small', 'span', 'strike', 'strong', 'style',
  'sub', 'summary', 'sup', 'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'time', 'title', 'tr', 'tt', 'u', 'ul', 'var', 'wbr',
];
const COMMON_ATTRS = ['aria-hidden', 'hidden', 'align', 'bgcolor', 'border', 'class', 'color', 'dir', 'height', 'id', 'lang', 'style', 'title', 'valign', 'width'];

const SANITIZE: sanitizeHtml.IOptions = {
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
const STYLE_BLOCK_RE = /(<style\b[^>]*>)([\s\S]*?)(<\/style>)/gi;
const cleanStyleText = (html: string) =>
  html.replace(STYLE_BLOCK_RE, (_, open: string, css: string, close: string) => open + css.replace(/<!--|-->/g, '').replace(/</g, '') + close);

const sanitizePass = (html: string) => cleanStyleText(sanitizeHtml(html, SANITIZE));

/**
 * The allow-list sanitizer behind `html_body`: no script, embeddable or form elements, no on*
 * attributes, no javascript: URLs, no script-capable CSS. Idempotent: the parser closes elements
 * differently once discarded ones are gone, so the pass is repeated until the output is stable.
 */
export function sanitizeEmailHtml(html: string): string {
  // NUL is never valid in HTML and some parsers treat it as a tag-name terminator
  let out = sanitizePass(html.replace(/\u0000/g, ''));
  for (let i = 0; i < 4; i++) {
    const again = sanitizePass(out);
    if (again === out) break;
    out = again;
  }
  return out;
}

/** Hidden-element selectors dropped by htmlToText (display:none, visibility:hidden, hidden, aria-hidden). */
const HIDDEN_STYLE_RE = /(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden|mso-hide\s*:\s*all|max-height\s*:\s*0(?:px)?\b|font-size\s*:\s*0(?:px)?\b|opacity\s*:\s*0(?:\.0+)?\b)/i;

/** Removes elements a reader would not see, before text conversion. */
function dropHidden(html: string): string {
  return sanitizeHtml(html, {
    allowedTags: false,
    allowedAttributes: false,
    allowVulnerableTags: true,
    nonTextTags: ['script', 'style', 'noscript', 'template', 'head', 'title', 'textarea', 'option', 'iframe', 'object', 'svg', 'math'],
    exclusiveFilter: (frame) => {
      const a = frame.attribs ?? {};
      return 'hidden' in a || a['aria-hidden'] === 'true' || HIDDEN_STYLE_RE.test(a.style ?? '') || (frame.tag === 'input' && a.type === 'hidden');
    },
  });
}

/**
 * HTML → plain text for agents: links as `label (url)`, scripts, styles, comments and hidden
 * elements dropped, images reduced to their alt text.
 */
export function htmlToText(html: string): string {
  const text = convert(dropHidden(html), {
    wordwrap: false,
    limits: { maxInputLength: 2_000_000, maxDepth: 200 },
    selectors: [
      { selector: 'a', options: { linkBrackets: ['(', ')'], hideLinkHrefIfSameAsText: true, ignoreHref: false } },
      { selector: 'img', format: 'skip' },
      { selector: 'h1', options: { uppercase: false } },
      { selector: 'h2', options: { uppercase: false } },
      { selector: 'h3', options: { uppercase: false } },
      { selector: 'h4', options: { uppercase: false } },
      { selector: 'h5', options: { uppercase: false } },
      { selector: 'h6', options: { uppercase: false } },
      { selector: 'table', format: 'block' },
      { selector: 'tr', format: 'block' },
      { selector: 'td', format: 'inline' },
      { selector: 'th', format: 'inline' },
      { selector: 'th', options: { uppercaseHeaderCells: false } },
    ],
  });
  return text.replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}
