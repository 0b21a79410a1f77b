// HTML compatibility (issue 25 item 3, docs/sender-checks.md): which features of an email's HTML some
// major mail clients do not support, from the caniemail.com data shipped inside the `caniemail`
// package (nothing is fetched). Runs in a derivation worker (parse-pool.ts op `htmlcheck`) on the
// HTML as the sender wrote it (before sanitizing), at most HTML_CHECK_MAX_CHARS of it, within
// HTML_CHECK_BUDGET_MS; views.ts keeps the result in the message's derived views. The check itself
// is in html-check-run.ts, so that loading these types does not load the data (1.6 MB).

/** The part of the HTML looked at; Gmail itself clips a message past ~102 KB. */
export const HTML_CHECK_MAX_CHARS = 128 * 1024;
/**
 * The CSS of `<style>` elements looked at, all of them together (issue 35 finding 4): caniemail's
 * cost grows faster than the CSS (many `@media` blocks: 32 KiB took 0.4 s of CPU, 128 KiB 22 s),
 * so past these bounds the rest of the CSS is left out, cut after the last whole rule, and the
 * check says `truncated`. Bytes are UTF-16 code units; rules are `{` blocks at any depth.
 */
export const HTML_CHECK_CSS = Object.freeze({ maxChars: 16 * 1024, maxRules: 400, maxAtRules: 100 });
/**
 * The inline CSS of `style="…"` attributes looked at, all of them together; past it further style
 * attributes are left out of the check (the element stays) and the check says `truncated`.
 */
export const HTML_CHECK_INLINE_CSS_CHARS = 32 * 1024;

/** Time budget of one check (its worker is ended past it: the check then reads `over_budget`). */
export const HTML_CHECK_BUDGET_MS = 5000;
/** Caps of a result: notes per client, characters per note, features. */
export const HTML_CHECK_CAPS = Object.freeze({ notes: 2, noteChars: 200, features: 100 });

/** The clients checked: the major families (caniemail ids, `family.platform`). */
export const HTML_CHECK_CLIENTS = Object.freeze([
  'gmail.desktop-webmail', 'gmail.ios', 'gmail.android', 'gmail.mobile-webmail',
  'outlook.windows', 'outlook.windows-mail', 'outlook.macos', 'outlook.outlook-com', 'outlook.ios', 'outlook.android',
  'apple-mail.macos', 'apple-mail.ios',
  'yahoo.desktop-webmail', 'yahoo.ios', 'yahoo.android',
] as const);

export interface HtmlCheckClient {
  /** caniemail id, e.g. `outlook.windows`. */
  client: string;
  /** Display name, e.g. `Outlook Windows`. */
  name: string;
  support: 'none' | 'partial';
  notes: string[];
}

export interface HtmlCheckFeature {
  /** caniemail's title, e.g. `<style> element`, `display:flex`. */
  feature: string;
  url: string | null;
  /** The clients of HTML_CHECK_CLIENTS that do not (`none`) or only partly (`partial`) support it. */
  clients: HtmlCheckClient[];
}

export interface HtmlCheck {
  /** Shares of (feature found × client checked) pairs, in percent, one decimal; they add up to 100. */
  supportedPercent: number;
  partialPercent: number;
  unsupportedPercent: number;
  /** Features the HTML uses that at least one checked client does not fully support; most clients affected first. */
  features: HtmlCheckFeature[];
  clientsChecked: string[];
  /**
   * Only part of the HTML was checked: its first HTML_CHECK_MAX_CHARS characters, or its CSS up to
   * HTML_CHECK_CSS and HTML_CHECK_INLINE_CSS_CHARS (boundCss).
   */
  truncated: boolean;
  /** Why there is no result: `over_budget` (time budget), `html_over_budget` (the HTML was not derived), `failed`. */
  error: string | null;
}

/** A check that could not be made. */
export const htmlCheckError = (error: string, truncated = false): HtmlCheck => ({
  supportedPercent: 0, partialPercent: 0, unsupportedPercent: 0, features: [], clientsChecked: [...HTML_CHECK_CLIENTS], truncated, error,
});


const STYLE_ELEMENT = /(<style\b[^>]*>)([\s\S]*?)(<\/style\s*>|$)/gi;
const STYLE_ATTRIBUTE = /(\sstyle\s*=\s*)("[^"]*"|'[^']*')/gi;

/**
 * `html` with its CSS within HTML_CHECK_CSS and HTML_CHECK_INLINE_CSS_CHARS, and whether anything
 * was left out. One linear pass over each element's CSS; a `<style>` element is cut after the last
 * whole top-level rule that fits (later elements are emptied), so what is checked still parses.
 */
export function boundCss(html: string): { html: string; cut: boolean } {
  let cut = false;
  let chars = 0;
  let rules = 0;
  let atRules = 0;
  let full = false;
  const styled = html.replace(STYLE_ELEMENT, (_m, open: string, css: string, close: string) => {
    if (full) {
      if (css.trim()) cut = true;
      return open + close;
    }
    let depth = 0;
    let keep = 0; // the end of the last whole top-level rule (or statement) that fits
    let quote = '';
    for (let i = 0; i < css.length; i++) {
      const c = css[i];
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = '';
      } else if (c === '"' || c === "'") quote = c;
      else if (c === '@') atRules++;
      else if (c === '{') {
        depth++;
        rules++;
      } else if (c === '}') {
        if (depth > 0) depth--;
        if (depth === 0) keep = i + 1;
      } else if (c === ';' && depth === 0) keep = i + 1;
      if (chars + i + 1 > HTML_CHECK_CSS.maxChars || rules > HTML_CHECK_CSS.maxRules || atRules > HTML_CHECK_CSS.maxAtRules) {
        full = true;
        break;
      }
    }
    if (!full) {
      chars += css.length;
      return open + css + close;
    }
    cut = true;
    chars += keep;
    return open + css.slice(0, keep) + close;
  });
  let inline = 0;
  let inlineFull = false;
  const out = styled.replace(STYLE_ATTRIBUTE, (m, _name: string, value: string) => {
    if (!inlineFull && inline + value.length <= HTML_CHECK_INLINE_CSS_CHARS) {
      inline += value.length;
      return m;
    }
    inlineFull = cut = true;
    return '';
  });
  return { html: out, cut };
}
