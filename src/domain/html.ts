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
  textFilter: (text, tagName) => (tagName === 'style' ? text.replace(/</g, '') : text),
  transformTags: {
    a: (tagName, attribs) => ({ tagName, attribs: { ...attribs, rel: 'noopener noreferrer nofollow' } }),
  },
  enforceHtmlBoundary: false,
  parseStyleAttributes: false,
};
(SANITIZE.allowedAttributes as Record<string, string[]>).a.push('rel');

/** The allow-list sanitizer behind `html_body`: no script, embeddable or form elements, no on* attributes, no javascript: URLs. */
export function sanitizeEmailHtml(html: string): string {
  // NUL is never valid in HTML and some parsers treat it as a tag-name terminator
  const clean = sanitizeHtml(html.replace(/\u0000/g, ''), SANITIZE);
  // style attribute values may still carry expression()/javascript: in legacy engines
  return clean.replace(/\sstyle="([^"]*)"/gi, (m, v: string) =>
    /expression\s*\(|javascript:|behavior\s*:|-moz-binding/i.test(v.replace(/&[a-z#0-9]+;|\\|\s/gi, '')) ? '' : m,
  );
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
