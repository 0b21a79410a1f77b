// Verification codes in an email (docs/extraction.md): what a person would type, found next to a
// word that announces a code, in several languages. Precision first: a number is a code only when a
// keyword says so, and never when it looks like money, a date, a year, a phone number, an order or
// tracking number, an IBAN, an IP address or a card's last four digits. Pure and linear: every
// pattern has bounded repetition, every input is capped.

export interface CodeCandidate {
  /** Exactly what a user types: digit grouping removed; alphanumeric codes as shown. */
  value: string;
  /** A short snippet around the code. */
  context: string;
}

export interface CodeInput {
  subject: string;
  /** Plain text of the message (the text part, or the HTML as text). */
  text: string | null;
  /** The HTML part as text (cells and spans separated by spaces), when there is one. */
  htmlText: string | null;
}

/** Characters of each input looked at. */
export const CODE_INPUT_MAX = 200_000;
const WINDOW_AFTER = 160;
const WINDOW_BEFORE = 80;
const CONTEXT = 50;

/** Words that announce a code, lowercase (matched case-insensitively at word starts). */
const KEYWORDS = [
  // English
  'verification code', 'confirmation code', 'security code', 'login code', 'sign-in code', 'sign in code', 'access code',
  'authentication code', 'one-time code', 'one time code', 'one-time password', 'one-time passcode', 'passcode', 'otp',
  'your code', 'the code', 'code is', 'code:', 'enter code', 'enter this code', 'use code', 'use this code', 'pin', '2fa code',
  'verify code', 'code below', 'following code', 'code to', 'single-use code', 'temporary code', 'token',
  // German
  'bestätigungscode', 'sicherheitscode', 'verifizierungscode', 'einmalcode', 'anmeldecode', 'zugangscode', 'einmalpasswort',
  'ihr code', 'dein code', 'code lautet', 'folgenden code', 'den code',
  // French
  'code de vérification', 'code de confirmation', 'code de sécurité', 'code à usage unique', 'votre code', 'le code', 'code suivant',
  // Spanish
  'código de verificación', 'código de confirmación', 'código de seguridad', 'tu código', 'su código', 'el código', 'código',
  // Japanese
  '認証コード', '確認コード', 'ワンタイムパスワード', 'セキュリティコード', 'ログインコード', '認証番号', '確認番号', 'コード', 'パスコード', '暗証番号',
  // generic
  'code',
] as const;

/** Words right before a number that make it something else (order, money, phone, card, …). */
const NOT_A_CODE_BEFORE = [
  'order', 'order number', 'order no', 'order #', 'invoice', 'rechnung', 'bestellung', 'bestellnummer', 'commande', 'pedido', 'factura',
  'tracking', 'sendungsnummer', 'suivi', 'seguimiento', 'phone', 'tel', 'telefon', 'téléphone', 'teléfono', 'fax', 'call', 'anrufen',
  'ending in', 'ends in', 'ending with', 'endet auf', 'endend auf', 'terminant par', 'termina en', 'card', 'karte', 'carte', 'tarjeta',
  'account', 'konto', 'compte', 'cuenta', 'iban', 'bic', 'ref', 'reference', 'referenz', 'référence', 'customer', 'kunden', 'ticket', 'case',
  'zip', 'plz', 'postal', 'room', 'zimmer', 'flight', 'flug', 'vol', 'vuelo', 'gate', 'seat', 'version', 'v', 'build', 'ip', 'port',
  'total', 'amount', 'betrag', 'montant', 'importe', 'price', 'preis', 'prix', 'precio', 'subtotal', 'tax', 'mwst', 'steuer',
  '注文番号', '電話', 'お問い合わせ番号', '合計', '金額', '価格',
];
const CURRENCY = /^(?:[$€£¥₹]|usd|eur|gbp|jpy|chf|円|dollars?|euros?)/i;
const CURRENCY_BEFORE = /(?:[$€£¥₹]|usd|eur|gbp|jpy|chf)\s?$/i;
/** Alphanumeric tokens that look like codes but are words of the trade. */
const STOP_TOKENS = new Set(['2FA', 'MFA', '3DS', 'OTP', 'PIN', 'SMS', 'UTC', 'GMT', 'CET', 'CEST', 'PST', 'EST', 'HTML', 'HTTP', 'HTTPS', 'URL', 'ID', 'FAQ']);

interface Found {
  value: string;
  score: number;
  at: number;
  source: string;
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const wordChar = /[\p{L}\p{N}_]/u;

/** The lowercase text, with runs of white space made single spaces (offsets kept per character). */
const clean = (s: string) => s.slice(0, CODE_INPUT_MAX).replace(/[\u00a0\u2007\u202f\t]/g, ' ').replace(/\r\n?/g, '\n');

function keywordHits(lower: string): { at: number; end: number; weight: number }[] {
  const hits: { at: number; end: number; weight: number }[] = [];
  for (const k of KEYWORDS) {
    // specific phrases weigh more than the bare word "code"
    const weight = k === 'code' || k === 'código' || k === 'コード' || k === 'token' || k === 'pin' ? 1 : k.length > 10 ? 3 : 2;
    for (let i = lower.indexOf(k); i >= 0; i = lower.indexOf(k, i + k.length)) {
      const before = i > 0 ? lower[i - 1] : ' ';
      const after = lower[i + k.length] ?? ' ';
      const ascii = /^[a-z0-9]/.test(k);
      // Latin keywords at word boundaries; Japanese ones anywhere
      if (ascii && (wordChar.test(before) || (/[a-z0-9]$/.test(k) && wordChar.test(after)))) continue;
      hits.push({ at: i, end: i + k.length, weight });
      if (hits.length > 500) return hits;
    }
  }
  return hits;
}

const PROMO = /(?:promo|coupon|discount|voucher|gift card|rabatt|gutschein|réduction|remise|descuento|cupón|cupon|クーポン|割引|% off|%off|% auf|% de descuento|% de réduction)/;

/** Whether the words just before `at` make the number something other than a code. */
function blockedBefore(lower: string, at: number): boolean {
  if (PROMO.test(lower.slice(Math.max(0, at - 40), at))) return true; // a shop's promo code is not a verification code
  const head = lower.slice(Math.max(0, at - 24), at).replace(/[\s:#.№°-]+$/u, '');
  if (CURRENCY_BEFORE.test(lower.slice(Math.max(0, at - 5), at))) return true;
  if (/[*•●x×]{2,}\s?$/i.test(lower.slice(Math.max(0, at - 8), at))) return true; // masked card: **** 1234
  return NOT_A_CODE_BEFORE.some((w) => head.endsWith(w) && !wordChar.test(head[head.length - w.length - 1] ?? ' '));
}

/** Candidates in [from, to) of `src` (original case), scored by their distance from the keyword. */
function candidatesIn(src: string, lower: string, from: number, to: number, weight: number, keywordAt: number, source: string, out: Found[]): void {
  const slice = src.slice(from, to);
  // digits: 4 to 8, optionally grouped by single spaces or hyphens ("559 120", "559-120", "5 5 9 1 2 0")
  const digits = /(?<![\p{L}\p{N}_.,:/+#@-]|\d[ -])(\d(?:[ -]?\d){3,7})(?![\p{L}\p{N}_@]|[.,:/]\d|[ -]\d)/gu;
  for (let m = digits.exec(slice); m; m = digits.exec(slice)) {
    const at = from + m.index;
    const raw = m[1];
    const value = raw.replace(/[ -]/g, '');
    if (value.length < 4 || value.length > 8) continue;
    if (/^(?:19|20)\d\d$/.test(value)) continue; // a year
    if (/^(\d)\1+$/.test(value) && value.length < 6) continue; // 0000, 1111: placeholders
    const after = src.slice(at + raw.length, at + raw.length + 6);
    if (PROMO.test(lower.slice(at + raw.length, at + raw.length + 30))) continue;
    if (CURRENCY.test(after.trimStart()) || /^\s?%/.test(after)) continue;
    if (/^[.,]\d{2}\b/.test(after)) continue; // 12.99
    if (blockedBefore(lower, at)) continue;
    // mixed separators (559 1-20) are not how codes are written; dates are not codes
    if (/ /.test(raw) && /-/.test(raw)) continue;
    if (/^(?:19|20)\d\d-\d\d?-\d\d?$|^\d\d?-\d\d?-(?:19|20)\d\d$/.test(raw)) continue;
    const distance = Math.abs(at - keywordAt);
    out.push({ value, score: weight * 100 - distance / 4 + (raw.length === value.length ? 5 : 0), at, source });
  }
  // alphanumeric, as shown: K7Q-9XZ, AB12CD, 7F3K9Q (upper case with at least one digit and one letter)
  const alnum = /(?<![\p{L}\p{N}_.@/-])([A-Z0-9]{2,8}(?:-[A-Z0-9]{2,8}){0,3})(?![\p{L}\p{N}_@/]|-[A-Z0-9])/gu;
  for (let m = alnum.exec(slice); m; m = alnum.exec(slice)) {
    const value = m[1];
    const plain = value.replace(/-/g, '');
    if (plain.length < 5 || plain.length > 12) continue;
    if (!/[0-9]/.test(plain) || !/[A-Z]/.test(plain)) continue;
    if (/^\d+$/.test(plain)) continue;
    if (STOP_TOKENS.has(value) || /^\d+(?:ST|ND|RD|TH|H|MIN|S|PX|PT|GB|MB|KB)$/.test(value)) continue;
    // IBANs and long references: two letters then many digits
    if (/^[A-Z]{2}\d{2}/.test(plain) && plain.length > 10) continue;
    const at = from + m.index;
    if (blockedBefore(lower, at) || PROMO.test(lower.slice(at + value.length, at + value.length + 30))) continue;
    const distance = Math.abs(at - keywordAt);
    out.push({ value, score: weight * 100 - distance / 4 - 10, at, source });
  }
}

function scan(source: string, text: string, out: Found[]): void {
  const src = clean(text);
  const lower = src.toLowerCase();
  for (const k of keywordHits(lower)) {
    candidatesIn(src, lower, k.end, Math.min(src.length, k.end + WINDOW_AFTER), k.weight, k.end, source, out);
    // "123456 is your code": a little before the keyword, on the same line
    const lineStart = src.lastIndexOf('\n', k.at) + 1;
    const from = Math.max(lineStart, k.at - WINDOW_BEFORE);
    candidatesIn(src, lower, from, k.at, k.weight - 0.5, k.at, source, out);
  }
}

const snippet = (text: string, value: string): string => {
  const src = clean(text);
  let at = src.indexOf(value);
  if (at < 0) {
    // grouped in the text: find the first digit run that reads as the value
    const first = value[0];
    for (let i = src.indexOf(first); i >= 0 && at < 0; i = src.indexOf(first, i + 1)) {
      if (src.slice(i, i + value.length * 2 + 2).replace(/[ -]/g, '').startsWith(value)) at = i;
    }
  }
  if (at < 0) return '';
  const s = Math.max(0, at - CONTEXT);
  const e = Math.min(src.length, at + value.length + CONTEXT);
  return `${s > 0 ? '…' : ''}${src.slice(s, e).replace(/\s+/g, ' ').trim()}${e < src.length ? '…' : ''}`;
};

/** The codes of an email, best first; [] when none. */
export function extractCodes(input: CodeInput): CodeCandidate[] {
  const found: Found[] = [];
  const sources: [string, string][] = [];
  if (input.subject) sources.push(['subject', input.subject]);
  if (input.text) sources.push(['text', input.text]);
  if (input.htmlText) sources.push(['html', input.htmlText]);
  for (const [name, text] of sources) scan(name, text, found);
  // the best score per value; a value found in several places (subject and body) ranks higher
  const byValue = new Map<string, { score: number; at: number; order: number; sources: Set<string> }>();
  found.forEach((f, order) => {
    const e = byValue.get(f.value);
    if (!e) byValue.set(f.value, { score: f.score, at: f.at, order, sources: new Set([f.source]) });
    else {
      e.sources.add(f.source);
      if (f.score > e.score) e.score = f.score;
    }
  });
  const ranked = [...byValue.entries()]
    .map(([value, e]) => ({ value, score: e.score + (e.sources.size - 1) * 20, order: e.order }))
    .sort((a, b) => b.score - a.score || a.order - b.order)
    .slice(0, 5);
  return ranked.map(({ value }) => {
    const where = sources.find(([, text]) => snippet(text, value) !== '');
    return { value, context: where ? snippet(where[1], value) : '' };
  });
}
