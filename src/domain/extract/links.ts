// Links of an email (docs/extraction.md): every <a href> of the HTML part (or every URL of the text
// part when there is no HTML), and List-Unsubscribe, each with what it is for and, for click-tracking
// redirects that carry their target in their own URL, where it really goes. Nothing is ever
// fetched. Tracking pixels are images, not links. Pure; the parser is htmlparser2 (linear).
import { createRequire } from 'node:module';

// htmlparser2 is loaded on the first extraction (in a derivation worker): the main thread imports
// this module for its kinds and types only (start-up time and idle memory, bench/README.md).
const requireOnUse = createRequire(import.meta.url);
const htmlParser = () => (requireOnUse('htmlparser2') as typeof import('htmlparser2')).Parser;

/** What a link is for: the wire enum of `links[].kind` (HTTP and MCP schemas read it from here). */
export const LINK_KINDS = ['verify', 'reset_password', 'login', 'unsubscribe', 'view_online', 'other'] as const;
export type LinkKind = (typeof LINK_KINDS)[number];
/** The kinds of a main action link: what the reader most likely came for. */
export const ACTION_KINDS: readonly LinkKind[] = ['verify', 'reset_password', 'login'];

export interface EmailLink {
  /** The href as written (entities decoded). */
  url: string;
  /** The link's text (or an image's alt text), on one line; '' when it has none. */
  text: string;
  kind: LinkKind;
  /** The real target when a click-tracking redirect carries it in its own URL, else null. */
  destination: string | null;
}

/** The main action link of an email (its first link of an action kind; links come best first), or null. */
export const mainActionLink = <L extends { kind: LinkKind }>(links: readonly L[]): L | null => links.find((l) => ACTION_KINDS.includes(l.kind)) ?? null;

export interface LinkInput {
  /** The HTML part (sanitized is fine: hrefs are kept). */
  html: string | null;
  text: string | null;
  /** The List-Unsubscribe header value. */
  listUnsubscribe: string | null;
}

export const LINK_INPUT_MAX = 1_000_000;
const MAX_LINKS = 200;
const TEXT_MAX = 200;

/** Words (in link text or the URL's path) that say what a link does, checked in this order. */
const KIND_WORDS: [LinkKind, RegExp][] = [
  ['unsubscribe', /unsubscribe|opt[ -]?out|abbestellen|abmelden vom|newsletter abmelden|austragen|désabonner|desabonner|désinscri|darse de baja|cancelar (?:la )?suscripci|配信停止|購読解除|manage (?:your )?(?:email )?preferences|email preferences/i],
  ['view_online', /view (?:it |this (?:e-?mail|message) )?(?:in (?:your|a) )?browser|view (?:it )?online|web ?version|online[- ]version|im browser (?:anzeigen|öffnen|ansehen)|voir (?:en ligne|dans (?:votre|le) navigateur)|ver en (?:el|tu|su) navegador|ver (?:la )?versión web|ブラウザで表示|ウェブ版/i],
  ['reset_password', /reset|password|passwort|kennwort|mot de passe|contraseña|パスワード/i],
  ['verify', /verif|confirm|activat|validat|bestätig|aktivier|vérifi|valider|confirmer|activer|verificar|confirmar|activar|確認|認証|有効化/i],
  ['login', /sign ?in|log ?in|magic link|anmelden|einloggen|se connecter|connexion|iniciar sesión|acceder|ログイン|サインイン/i],
];
const ACTION_RANK: Record<LinkKind, number> = { verify: 0, reset_password: 0, login: 1, other: 2, view_online: 3, unsubscribe: 4 };

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, TEXT_MAX);

function kindOf(text: string, url: string): LinkKind {
  let path = url;
  try {
    const u = new URL(url);
    path = `${u.pathname} ${[...u.searchParams.keys()].join(' ')}`;
  } catch {
    // not absolute: judged as written
  }
  if (/^mailto:/i.test(url)) return /unsubscribe|remove/i.test(url) ? 'unsubscribe' : 'other';
  for (const [kind, re] of KIND_WORDS) if (re.test(text)) return kind;
  for (const [kind, re] of KIND_WORDS) if (re.test(path)) return kind;
  return 'other';
}

const httpUrl = (s: string): string | null => {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
};

/**
 * Where a click-tracking redirect leads, when its own URL says so: AWS SES `awstrack.me/L0/<encoded
 * URL>/…`, or a query parameter (`url`, `redirect`, `u`, `target`, `dest`, …) holding a full http(s)
 * URL. Opaque trackers (SendGrid `ls/click?upn=`) give null.
 */
export function destinationOf(href: string): string | null {
  let u: URL;
  try {
    u = new URL(href);
  } catch {
    return null;
  }
  if (/(^|\.)awstrack\.me$/i.test(u.hostname)) {
    const m = /^\/L\d+\/([^/]+)/.exec(u.pathname);
    if (m) {
      try {
        const target = httpUrl(decodeURIComponent(m[1]));
        if (target) return target;
      } catch {
        // not valid percent-encoding
      }
    }
  }
  for (const name of ['url', 'redirect', 'redirect_url', 'redirect_uri', 'u', 'target', 'dest', 'destination', 'to', 'link', 'goto', 'r', 'q']) {
    const v = u.searchParams.get(name);
    if (!v) continue;
    const target = httpUrl(v);
    if (target && new URL(target).hostname !== u.hostname) return target;
  }
  return null;
}

interface Raw { url: string; text: string; order: number }

function anchorsOf(html: string): Raw[] {
  const out: Raw[] = [];
  let current: { href: string; text: string } | null = null;
  let depth = 0;
  const Parser = htmlParser();
  const parser = new Parser({
    onopentag(name, attribs) {
      if (name === 'a') {
        if (current) return; // nested anchors: the outer one keeps its text
        const href = (attribs.href ?? '').trim();
        current = { href, text: '' };
        depth = 0;
        return;
      }
      if (current) {
        depth++;
        if (name === 'img' && attribs.alt) current.text += ` ${attribs.alt} `;
        if (name === 'br') current.text += ' ';
      }
    },
    ontext(text) {
      if (current && current.text.length < TEXT_MAX * 4) current.text += text;
    },
    onclosetag(name) {
      if (!current) return;
      if (name === 'a') {
        if (current.href && out.length < MAX_LINKS) out.push({ url: current.href, text: oneLine(current.text), order: out.length });
        current = null;
      } else depth--;
    },
  }, { decodeEntities: true });
  parser.write(html.slice(0, LINK_INPUT_MAX));
  parser.end();
  return out;
}

/** URLs of plain text, each with the text of its line as its label. */
function textUrls(text: string): Raw[] {
  const out: Raw[] = [];
  const src = text.slice(0, LINK_INPUT_MAX);
  const re = /\bhttps?:\/\/[^\s<>"'()[\]{}]{1,2000}/gi;
  for (let m = re.exec(src); m && out.length < MAX_LINKS; m = re.exec(src)) {
    const url = m[0].replace(/[.,;:!?]+$/, '');
    const lineStart = src.lastIndexOf('\n', m.index) + 1;
    let lineEnd = src.indexOf('\n', m.index);
    if (lineEnd < 0) lineEnd = src.length;
    const line = oneLine(src.slice(lineStart, lineEnd).replace(url, ' '));
    // "Confirm your address:\nhttps://…": the line before names it
    const prevStart = src.lastIndexOf('\n', Math.max(0, lineStart - 2)) + 1;
    const label = line || oneLine(src.slice(prevStart, Math.max(prevStart, lineStart - 1)));
    out.push({ url, text: label, order: out.length });
  }
  return out;
}

/** List-Unsubscribe: `<https://…>, <mailto:…>`. */
function unsubscribeUrls(header: string): string[] {
  const out: string[] = [];
  const re = /<([^<>\s]{1,2000})>/g;
  for (let m = re.exec(header); m && out.length < 5; m = re.exec(header)) {
    if (/^(?:https?|mailto):/i.test(m[1])) out.push(m[1]);
  }
  return out;
}

/** The links of an email, best first (the main action first, unsubscribe last); [] when none. */
export function extractLinks(input: LinkInput): EmailLink[] {
  const raws = input.html ? anchorsOf(input.html) : input.text ? textUrls(input.text) : [];
  const seen = new Map<string, EmailLink & { order: number }>();
  for (const r of raws) {
    if (!/^(?:https?:|mailto:)/i.test(r.url) || r.url.length > 4000) continue; // anchors, javascript:, cid: are not links to follow
    const destination = destinationOf(r.url);
    const kind = kindOf(r.text, destination ?? r.url);
    const prev = seen.get(r.url);
    if (prev) {
      if (!prev.text && r.text) prev.text = r.text;
      continue;
    }
    seen.set(r.url, { url: r.url, text: r.text, kind, destination, order: r.order });
  }
  let order = seen.size;
  for (const url of input.listUnsubscribe ? unsubscribeUrls(input.listUnsubscribe) : []) {
    if (!seen.has(url)) seen.set(url, { url, text: 'List-Unsubscribe', kind: 'unsubscribe', destination: null, order: order++ });
  }
  return [...seen.values()]
    .sort((a, b) => ACTION_RANK[a.kind] - ACTION_RANK[b.kind] || a.order - b.order)
    .map(({ url, text, kind, destination }) => ({ url, text, kind, destination }));
}
