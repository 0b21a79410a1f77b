// The HTML of the pages: a shared layout and one function per page. Every value that came from
// mail or from the URL goes through esc(); the pages carry no inline script or style (pageCsp).
// The email page shows the views the registry gives the 'page' face (derive/registry.ts `wire.faces`):
// those it has a place or words of its own for, and any other in its details, generically.
import type { EmailFull } from '../domain/message.ts';
import { EMAIL_VIEWS, type EmailViewName, type Wire } from '../derive/registry.ts';
import { authHints, authLine } from '../domain/authentication.ts';
import { decodeWords } from 'postal-mime';

import { iso } from '../domain/clock.ts';
import { mainActionLink } from '../domain/extract/links.ts';
import { INLINE_IMAGE_TYPES } from './frame.ts';
import { escapeHtml as esc } from '../domain/escape.ts';

export { esc };

/**
 * Text whose `backtick spans` are code (caniemail's notes, spamd's rule descriptions): escaped, each
 * closed pair of backticks shown as a <code> element; an unpaired backtick stays as text.
 */
export function withCode(text: string): string {
  const parts = text.split('`');
  return parts.map((part, i) => {
    if (i % 2 === 0) return esc(part);
    return i === parts.length - 1 ? `\`${esc(part)}` : `<code>${esc(part)}</code>`;
  }).join('');
}

/** `/inbox/<address>` as web_url writes it (docs/contract-decisions.md): the address percent-encoded, `@` kept. */
export const inboxPath = (address: string): string => `/inbox/${encodeURIComponent(address).replace(/%40/g, '@')}`;
export const emailPath = (address: string, id: string): string => `${inboxPath(address)}/${encodeURIComponent(id)}`;

export interface Assets {
  js: string;
  css: string;
}

export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

const utc = (ms: number) => `${iso(ms).slice(0, 19).replace('T', ' ')} UTC`;

function layout(assets: Assets, opts: { title: string; page: string; body: string; data?: Record<string, string> }): string {
  const data = Object.entries(opts.data ?? {}).map(([k, v]) => ` data-${k}="${esc(v)}"`).join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>${esc(opts.title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${esc(assets.css)}">
<script src="${esc(assets.js)}" type="module"></script>
</head>
<body data-page="${esc(opts.page)}"${data}>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/">ephemail</a><nav><a href="/docs">API</a></nav></header>
<main id="main" tabindex="-1">
${opts.body}
</main>
<div id="toast" class="toast" role="status" aria-live="polite"></div>
</body>
</html>`;
}

export function homePage(assets: Assets, domains: readonly string[], ttlSeconds: number): string {
  const minutes = Math.round(ttlSeconds / 60);
  const body = `<section class="hero">
<h1>Disposable inboxes</h1>
<p class="lead">Get a throwaway address in one click and watch mail arrive live: for testing sign-up flows and keeping your real address private.</p>
<p class="lead muted">Receive-only and public: anyone who knows an address can read its mail, and every email is deleted ${minutes} minutes after it arrives.</p>
<p><button id="create" class="primary" type="button">Create a random inbox</button></p>
<p id="create-error" class="error" role="alert" hidden></p>
</section>
<section class="card">
<form id="open-form" action="/open" method="get" class="open-form">
<label for="open-address">Open any address</label>
<div class="field-row"><input id="open-address" name="address" type="text" inputmode="email" autocomplete="off" autocapitalize="none" spellcheck="false" placeholder="name@${esc(domains[0])}" required maxlength="320"><button type="submit">Open</button></div>
<p class="hint muted">A name without <code>@</code> opens it at <code>${esc(domains[0])}</code>.</p>
</form>
</section>
<section class="card">
<h2>Active domains</h2>
<ul class="domains">${domains.map((d) => `<li><code>${esc(d)}</code></li>`).join('')}</ul>
<p class="muted">Any name at these domains receives mail from the moment you use it. Automate it with the <a href="/docs">JSON API</a> or the MCP tool endpoint at <code>/mcp</code>.</p>
</section>`;
  return layout(assets, { title: 'ephemail: disposable inboxes', page: 'home', body, data: { domain: domains[0] } });
}

/** Where a mail client reads the inbox (GET /api/v1 mail_access), for the page's "Open in a mail client". */
export interface MailClientAccess {
  imap: { host: string; port: number; starttls: boolean } | null;
  pop3: { host: string; port: number; starttls: boolean } | null;
}

/** "Open in a mail client": server, port, security and user name of IMAP and POP3 (docs/imap.md); empty when both are off. */
function mailClientBox(address: string, mail: MailClientAccess | undefined): string {
  if (!mail || (!mail.imap && !mail.pop3)) return '';
  const row = (name: string, e: { host: string; port: number; starttls: boolean }) =>
    `<dt>${name}</dt><dd>server <code>${esc(e.host)}</code>, port <code>${e.port}</code>, ${e.starttls ? 'STARTTLS' : 'no encryption'}</dd>`;
  return `<details class="mail-client"><summary>Open in a mail client</summary>
<dl>${mail.imap ? row('IMAP', mail.imap) : ''}${mail.pop3 ? row('POP3', mail.pop3) : ''}<dt>User name</dt><dd><code>${esc(address)}</code></dd><dt>Password</dt><dd>anything (or an API key)</dd></dl>
<p class="muted">Receive-only: no outgoing server is needed.</p>
</details>`;
}

export function inboxPage(assets: Assets, address: string, ttlSeconds: number, mail?: MailClientAccess): string {
  const minutes = Math.round(ttlSeconds / 60);
  const body = `<section class="inbox-head">
<p class="muted label">Inbox</p>
<div class="address-row"><h1 id="address" class="address">${esc(address)}</h1><button id="copy" type="button" data-copy="${esc(address)}">Copy address</button></div>
<p class="status"><span id="live" class="dot" aria-hidden="true"></span><span id="status-text">Connecting…</span></p>
${mailClientBox(address, mail)}
</section>
<div class="toolbar"><label class="search"><span class="visually-hidden">Search this inbox</span><input id="search" type="search" placeholder="Search sender or subject ( / )" autocomplete="off" aria-label="Search this inbox by sender or subject"></label><span id="count" class="muted">Loading…</span><button id="empty" type="button" class="danger" disabled>Empty inbox</button></div>
<ol id="emails" class="list" aria-label="Emails, newest first"></ol>
<div id="empty-state" class="empty-state" hidden>
<p><strong>No mail yet.</strong> Send something to <code>${esc(address)}</code>: it shows up here by itself.</p>
<p class="muted">Emails are deleted ${minutes} minutes after they arrive.</p>
</div>
<noscript><p class="error">This page needs JavaScript to list mail live; the <a href="/docs">JSON API</a> works without it.</p></noscript>`;
  return layout(assets, { title: `${address} · ephemail`, page: 'inbox', body, data: { address, inbox: inboxPath(address) } });
}

/** Whether the HTML names anything remote an image could come from (src, background, CSS url()). */
export function hasRemoteContent(html: string): boolean {
  // no two adjacent unbounded runs (linear time on hostile input): whitespace, then an optional quote and whitespace
  return /\b(?:src|srcset|background|poster)\s*=\s*(?:["']\s*)?(?:https?:)?\/\/|url\(\s*(?:["']\s*)?(?:https?:)?\/\/|&#|\\/i.test(html);
}

/**
 * What the reader most likely came for, above everything else: the codes found in the email (each
 * with a copy button) and its main action link, marked as extracted from an untrusted email.
 */
function extracted(e: EmailFull): string {
  const action = mainActionLink(e.links);
  if (e.codes.length === 0 && !action) return '';
  const label: Record<string, string> = { verify: 'Verify', reset_password: 'Reset password', login: 'Sign in' };
  const codes = e.codes.slice(0, 3).map((c, i) => `<div class="code-row"><code class="code${i === 0 ? ' best' : ''}" title="${esc(c.context)}">${esc(c.value)}</code><button type="button" class="copy-code" data-code="${esc(c.value)}" aria-label="Copy code ${esc(c.value)}">Copy</button></div>`).join('');
  const link = action
    ? `<p class="action-link">${esc(label[action.kind])}: <a href="${esc(action.url)}" target="_blank" rel="noopener noreferrer nofollow">${esc(action.text || action.url)}</a>${action.destination ? ` <span class="muted">→ ${esc(action.destination)}</span>` : ''}</p>`
    : '';
  return `<section class="card extracted" aria-labelledby="extracted-h"><h2 id="extracted-h">${e.codes.length > 0 ? 'Code' : 'Action'} <span class="muted">(found in this email: it is written by the sender)</span></h2>${codes}${link}</section>`;
}

const LINK_KINDS: Record<string, string> = { verify: 'Verify', reset_password: 'Reset password', login: 'Sign in', unsubscribe: 'Unsubscribe', view_online: 'View online' };

/** Every link of the email (the API's `links`): its kind, text and address; a click-tracking redirect shows where it really goes. */
function linkList(e: EmailFull): string {
  if (e.links.length === 0) return '<p class="muted">This email has no links.</p>';
  const items = e.links.map((l) => {
    const kind = LINK_KINDS[l.kind] ? `<span class="link-kind">${esc(LINK_KINDS[l.kind])}</span> ` : '';
    const text = l.text ? `<span class="link-text">${esc(l.text)}</span><br>` : '';
    const tracked = l.destination
      ? `<br><span class="tracked">Tracked link: it goes through the sender's click counter, then to <a href="${esc(l.destination)}" target="_blank" rel="noopener noreferrer nofollow">${esc(l.destination)}</a></span>`
      : '';
    return `<li>${kind}${text}<a class="link-url" href="${esc(l.url)}" target="_blank" rel="noopener noreferrer nofollow">${esc(l.url)}</a>${tracked}</li>`;
  }).join('');
  return `<p class="muted">Links found in this email (written by the sender: check where they go before you open them).</p><ul class="links">${items}</ul>`;
}

const SUPPORT_WORD: Record<string, string> = { none: 'not supported', partial: 'partly supported' };

/**
 * The sender checks (docs/sender-checks.md): spamd's score and the HTML compatibility, in plain
 * words; '' when the email has neither (no spamd configured, no HTML part).
 */
function senderChecks(e: EmailFull): string {
  let out = '';
  if (e.spam) {
    if ('error' in e.spam) out += `<section class="check spam-check"><h3>Spam score</h3><p class="muted">No score: ${esc(e.spam.error)}.</p></section>`;
    else {
      const s = e.spam;
      const rules = s.rules.map((r) => `<tr><td class="num">${esc(r.score.toFixed(1))}</td><th scope="row"><code>${esc(r.name)}</code></th><td>${withCode(r.description)}</td></tr>`).join('');
      out += `<section class="check spam-check"><h3>Spam score</h3><p class="spam-verdict"><strong>${esc(s.score.toFixed(1))}</strong> of ${esc(s.threshold.toFixed(1))}: ${s.isSpam ? 'SpamAssassin would call this spam' : 'not spam by SpamAssassin'}${s.truncated ? ' <span class="muted">(first 512 KiB checked)</span>' : ''}</p>${rules ? `<div class="table-wrap"><table class="spam-rules"><thead><tr><th>Points</th><th>Rule</th><th>Meaning</th></tr></thead><tbody>${rules}</tbody></table></div>` : ''}</section>`;
    }
  }
  if (e.htmlCheck) {
    const c = e.htmlCheck;
    if (c.error) out += `<section class="check html-check"><h3>HTML compatibility</h3><p class="muted">Not checked: ${esc(c.error.replace(/_/g, ' '))}.</p></section>`;
    else {
      const items = c.features.map((f) => {
        const clients = f.clients.map((cl) => `<li>${esc(cl.name)}: ${SUPPORT_WORD[cl.support]}${cl.notes.length ? ` <span class="muted">(${cl.notes.map(withCode).join(' ')})</span>` : ''}</li>`).join('');
        const title = f.url ? `<a href="${esc(f.url)}" target="_blank" rel="noopener noreferrer">${withCode(f.feature)}</a>` : withCode(f.feature);
        return `<li><strong class="feature">${title}</strong><ul>${clients}</ul></li>`;
      }).join('');
      out += `<section class="check html-check"><h3>HTML compatibility</h3><p class="html-support"><strong>${esc(String(c.supportedPercent))}%</strong> supported, ${esc(String(c.partialPercent))}% partly, ${esc(String(c.unsupportedPercent))}% not, across Gmail, Outlook, Apple Mail and Yahoo (data: caniemail.com)${c.truncated ? ' <span class="muted">(checked in part: the first 128 KiB, its CSS bounded)</span>' : ''}</p>${items ? `<ul class="html-features">${items}</ul>` : '<p class="muted">Every feature this HTML uses works in all of them.</p>'}</section>`;
    }
  }
  return out;
}

/** A header value with its encoded words decoded; as received when it has none or they are broken. */
function decodeHeader(value: string): string {
  if (!value.includes('=?')) return value;
  try {
    return decodeWords(value);
  } catch {
    return value;
  }
}

/** The email's own HTML is never part of this page: only the address of its isolated frame. */

/** An entry of the registry, as far as the page reads one. */
export interface PageView {
  name: string;
  wire: Wire | null;
}

/**
 * The views the page shows in a place of its own (the details' To, Cc and authentication rows, the
 * header table, the body tabs, the attachments, the codes and action link, the Links and Checks
 * tabs). Any other view the registry gives the 'page' face is a row of the details: in its own words
 * when DETAIL_ROWS has them, else generically (its field and value).
 */
export const OWN_PLACE: ReadonlySet<string> = new Set<EmailViewName>(['to', 'cc', 'authentication', 'headers', 'textBody', 'htmlBody', 'attachments', 'codes', 'links', 'spam', 'htmlCheck']);

/** A view's row of the details in words of its own: its label and its value as HTML ('' for no row). */
interface DetailRow<K extends EmailViewName> {
  label: string;
  html(v: EmailFull[K]): string;
}
const detailRow = <K extends EmailViewName>(_name: K, r: DetailRow<K>) => r;

/**
 * "French (fr)" for a language code (BCP 47, as the `language` view gives it); the code alone when it
 * has no English name. The names are made per call (~10 µs), never at load: a DisplayNames made when
 * the module loaded mapped 4.4 MB of ICU's data into every service's RSS, page or no page.
 */
export function languageName(code: string): string {
  let name: string | undefined;
  try {
    name = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' }).of(code);
  } catch {
    name = undefined; // not a well-formed code
  }
  return name && name !== code ? `${name} (${code})` : code;
}

const DETAIL_ROWS: { [K in EmailViewName]?: DetailRow<K> } = {
  language: detailRow('language', { label: 'Language', html: (code) => (code ? esc(languageName(code)) : '') }),
};

/** Longest value shown generically (a view's JSON can be long): cut, with an ellipsis. */
const GENERIC_MAX = 500;

/** A view's value as the details show one without words of its own: text, a number or a yes/no as it is, anything else as JSON (code); '' when empty. */
export function genericValue(value: unknown): string {
  if (value === null || value === undefined || value === '') return '';
  if (Array.isArray(value) && value.length === 0) return '';
  if (typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) return '';
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') text = String(value);
  else {
    try {
      text = JSON.stringify(value) ?? '';
    } catch {
      text = String(value);
    }
  }
  if (text.length > GENERIC_MAX) text = `${text.slice(0, GENERIC_MAX)}…`;
  return typeof value === 'object' ? `<code>${esc(text)}</code>` : esc(text);
}

/** "message_id" → "Message id": a field's name as a label. */
const fieldLabel = (field: string): string => {
  const words = field.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** The details' rows of the page's views without a place of their own, in the registry's order: label and value HTML, non-empty. */
function viewRows(e: EmailFull, views: readonly PageView[]): { label: string; html: string }[] {
  const values = e as unknown as Record<string, unknown>;
  return views.flatMap((view) => {
    if (!view.wire?.faces.includes('page') || OWN_PLACE.has(view.name)) return [];
    const own = DETAIL_ROWS[view.name as EmailViewName] as DetailRow<EmailViewName> | undefined;
    const value = values[view.name];
    const html = own ? own.html(value as never) : genericValue(value);
    return html ? [{ label: own ? own.label : fieldLabel(view.wire.field), html }] : [];
  });
}


/** What the "Details" hold (collapsed on phones, so that the body starts on the first screen). */
const metaSummary = (e: EmailFull, rows: readonly { label: string }[]): string =>
  [...(e.cc ? ['to', 'cc', 'authentication'] : ['to', 'authentication']), ...rows.map((r) => r.label.toLowerCase()), 'times'].join(', ');

/** The verdicts on one line, with a plain-words hint for each failure (docs/authentication.md). */
function authenticationRow(e: EmailFull): string {
  const a = e.authentication;
  if (!a) return '<span class="muted" id="auth-line">not checked yet (reload in a few seconds)</span>';
  const hints = authHints(a);
  return `<span id="auth-line">${esc(authLine(a))}</span>${hints.length ? `<ul class="auth-hints muted">${hints.map((h) => `<li>${esc(h)}</li>`).join('')}</ul>` : ''}`;
}

/** The email's page; `views`: the registry whose 'page' views it shows (tests pass their own). */
export function emailPage(assets: Assets, e: EmailFull, views: readonly PageView[] = EMAIL_VIEWS): string {
  const hasHtml = e.htmlBody !== null && e.htmlBody.trim() !== '';
  const first = hasHtml ? 'html' : 'text';
  const tab = (id: string, label: string) =>
    `<button type="button" role="tab" id="tab-${id}" aria-controls="panel-${id}" aria-selected="${id === first}" tabindex="${id === first ? 0 : -1}">${label}</button>`;
  const row = (label: string, value: string) => (value ? `<dt>${label}</dt><dd>${value}</dd>` : '');
  const attachments = e.attachments.length === 0 ? '' : `<section class="card attachments" aria-labelledby="att-h">
<h2 id="att-h">Attachments (${e.attachments.length})</h2>
<ul>${e.attachments.map((a) => {
    const id = encodeURIComponent(a.id);
    // a raster image shows as a thumbnail from the email's own image route (raster only, nosniff, sandboxed: routes.ts); never SVG
    const thumb = INLINE_IMAGE_TYPES.has(a.contentType)
      ? `<img class="thumb" src="/web/frames/${esc(encodeURIComponent(e.id))}/cid/${esc(id)}" alt="" width="56" height="56" loading="lazy" decoding="async">`
      : '';
    return `<li${thumb ? ' class="has-thumb"' : ''}>${thumb}<span class="att-text"><a class="download" href="/api/v1/emails/${esc(e.id)}/attachments/${esc(id)}" download="${esc(a.filename)}">${esc(a.filename)}</a> <span class="muted">${esc(humanSize(a.sizeBytes))} · ${esc(a.contentType)}</span></span></li>`;
  }).join('')}</ul>
</section>`;
  // decoded (RFC 2047 encoded words) by default, the value as received one click away
  const headers = e.headers.map((h) => {
    const decoded = decodeHeader(h.value);
    return `<tr><th scope="row">${esc(h.name)}</th><td><span class="hv-decoded">${esc(decoded)}</span><span class="hv-raw" hidden>${esc(h.value)}</span></td></tr>`;
  }).join('');
  const checks = senderChecks(e);
  const extraRows = viewRows(e, views);
  // the text body's language, for screen readers and hyphenation (a code as the view gives it: checked, not trusted)
  const textLang = typeof e.language === 'string' && /^[a-z]{2,3}$/.test(e.language) ? ` lang="${e.language}"` : '';
  const body = `<nav class="crumbs"><a id="back" href="${esc(inboxPath(e.address))}">← ${esc(e.address)}</a></nav>
<article class="email">
<h1 class="subject">${e.subject ? esc(e.subject) : '<span class="muted">(no subject)</span>'}</h1>
<div id="meta" class="meta-block">
<dl class="meta">
${row('From', esc(e.sender) || '<span class="muted">(none)</span>')}
</dl>
<details class="meta-more" id="meta-more" open><summary>Details <span class="muted">(${esc(metaSummary(e, extraRows))})</span></summary>
<dl class="meta">
${row('Mailed by', esc(e.mailedBy ?? ''))}
${row('Authentication', authenticationRow(e))}
${row('To', esc(e.to))}
${row('Cc', esc(e.cc))}
${extraRows.map((r) => row(esc(r.label), r.html)).join('')}
${row('Received', `<time data-rel datetime="${iso(e.receivedAt)}" title="${utc(e.receivedAt)}">${utc(e.receivedAt)}</time>`)}
${row('Expires', `<time data-countdown datetime="${iso(e.expiresAt)}" title="${utc(e.expiresAt)}">${utc(e.expiresAt)}</time>`)}
</dl>
</details>
</div>
${extracted(e)}
<div class="actions"><button id="delete-email" type="button" class="danger">Delete email</button> <a id="download-eml" class="button" href="/api/v1/emails/${esc(e.id)}/raw" download="${esc(e.id)}.eml">Download .eml</a></div>
${attachments}
<div class="tabs" role="tablist" aria-label="Email body">${hasHtml ? tab('html', 'HTML') : ''}${tab('text', 'Plain text')}${tab('headers', `Headers (${e.headers.length})`)}${tab('links', `Links (${e.links.length})`)}${checks ? tab('checks', 'Checks') : ''}${tab('source', 'Source')}</div>
${hasHtml ? `<section id="panel-html" role="tabpanel" aria-labelledby="tab-html" class="panel"${first === 'html' ? '' : ' hidden'}>
<div class="frame-bar"><span class="muted frame-note">${hasRemoteContent(e.htmlBody ?? '')
    ? 'Shown isolated: no scripts, no forms. Remote images are blocked, so tracking pixels do not fire.</span><button id="load-images" type="button">Load remote images</button>'
    : 'Shown isolated: no scripts, no forms, nothing loaded from elsewhere.</span>'}<span class="frame-tools"><span class="preview-widths" role="group" aria-label="Preview width"><button type="button" data-width="375" aria-pressed="false">Phone</button><button type="button" data-width="768" aria-pressed="false">Tablet</button><button type="button" data-width="" aria-pressed="true">Full width</button></span><button id="zoom-toggle" type="button" aria-pressed="false" hidden>Zoom 100%</button></span></div>
<div class="frame-wrap"><iframe id="body-frame" title="Email body (isolated)" sandbox="allow-same-origin allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" loading="eager" src="/web/frames/${esc(e.id)}"></iframe></div>
</section>` : ''}
<section id="panel-text" role="tabpanel" aria-labelledby="tab-text" class="panel"${first === 'text' ? '' : ' hidden'}>
${e.textBody !== null && e.textBody !== '' ? `<pre class="text-body"${textLang} data-linkify>${esc(e.textBody.trimEnd())}</pre>` : '<p class="muted">This email has no plain-text part.</p>'}
</section>
<section id="panel-headers" role="tabpanel" aria-labelledby="tab-headers" class="panel" hidden>
<p><button id="headers-raw" type="button" aria-pressed="false">Show raw values</button></p>
<div class="table-wrap"><table class="headers"><tbody>${headers}</tbody></table></div>
</section>
<section id="panel-links" role="tabpanel" aria-labelledby="tab-links" class="panel" hidden>
${linkList(e)}
</section>
${checks ? `<section id="panel-checks" role="tabpanel" aria-labelledby="tab-checks" class="panel" hidden>
${checks}
</section>` : ''}
<section id="panel-source" role="tabpanel" aria-labelledby="tab-source" class="panel" hidden>
<p class="muted">The message as received (parts over 5 MB are cut out of the stored copy).</p>
<pre class="text-body" id="source-body" aria-live="polite">Loading…</pre>
</section>
</article>`;
  return layout(assets, {
    title: `${e.subject || '(no subject)'} · ephemail`,
    page: 'email',
    body,
    data: { id: e.id, address: e.address, inbox: inboxPath(e.address) },
  });
}

export function messagePage(assets: Assets, title: string, message: string, link?: { href: string; label: string }): string {
  const body = `<section class="card message"><h1>${esc(title)}</h1><p>${esc(message)}</p>
<p>${link ? `<a href="${esc(link.href)}">${esc(link.label)}</a> · ` : ''}<a href="/">Home</a></p></section>`;
  return layout(assets, { title: `${title} · ephemail`, page: 'message', body });
}
