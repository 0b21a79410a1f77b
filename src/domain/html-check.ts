// HTML compatibility (issue 25 item 3, docs/sender-checks.md): which features of an email's HTML some
// major mail clients do not support, from the caniemail.com data shipped inside the `caniemail`
// package (nothing is fetched). Runs in a derivation worker (parse-pool.ts op `htmlcheck`) on the
// HTML as the sender wrote it (before sanitizing), at most HTML_CHECK_MAX_CHARS of it, within
// HTML_CHECK_BUDGET_MS; views.ts keeps the result in the message's derived views. The check itself
// is in html-check-run.ts, so that loading these types does not load the data (1.6 MB).

/** The part of the HTML looked at; Gmail itself clips a message past ~102 KB. */
export const HTML_CHECK_MAX_CHARS = 128 * 1024;
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
  /** Only the first HTML_CHECK_MAX_CHARS characters of the HTML were checked. */
  truncated: boolean;
  /** Why there is no result: `over_budget` (time budget), `html_over_budget` (the HTML was not derived), `failed`. */
  error: string | null;
}

/** A check that could not be made. */
export const htmlCheckError = (error: string, truncated = false): HtmlCheck => ({
  supportedPercent: 0, partialPercent: 0, unsupportedPercent: 0, features: [], clientsChecked: [...HTML_CHECK_CLIENTS], truncated, error,
});

