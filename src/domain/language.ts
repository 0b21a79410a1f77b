// The language of an email's body (the `language` view, derive/registry.ts): franc-min's trigram
// detector (MIT, ~230 KB with its dependencies; the 82 languages of 8M+ speakers) over the start of
// the text body. Written as a BCP 47 primary language subtag: the ISO 639-1 code when the language
// has one (`fr`, `en`, `zh`), else its ISO 639-3 code (`ceb`, `hms`); null when the text is too short
// or the detector cannot tell. Loaded on a derivation worker only (franc-min is an ES module).

/** Characters of the body the detector reads (franc itself reads at most 2,048). */
export const LANGUAGE_MAX_CHARS = 2048;
/** Fewer letters than this: null (trigrams of a line or two say little). */
export const LANGUAGE_MIN_LETTERS = 40;
/** Under this many letters the best guess must lead the next by SHORT_LEAD (franc's scores: best = 1). */
export const LANGUAGE_SURE_LETTERS = 100;
const SHORT_LEAD = 0.15;
/** Time budget of the detection (a task of its own on a worker); far more than it takes (~1 ms). */
export const LANGUAGE_BUDGET_MS = 1000;

/** ISO 639-3 → 639-1, for franc-min's languages that have a two-letter code (individual or macrolanguage). */
const TWO_LETTER: Readonly<Record<string, string>> = Object.freeze({
  spa: 'es', eng: 'en', por: 'pt', ind: 'id', fra: 'fr', deu: 'de', jav: 'jv', vie: 'vi', ita: 'it', tur: 'tr', pol: 'pl',
  swh: 'sw', sun: 'su', ron: 'ro', hau: 'ha', bos: 'bs', hrv: 'hr', nld: 'nl', srp: 'sr', yor: 'yo', uzn: 'uz', zlm: 'ms',
  ibo: 'ig', tgl: 'tl', hun: 'hu', azj: 'az', ces: 'cs', run: 'rn', plt: 'mg', nya: 'ny', kin: 'rw', zul: 'zu', swe: 'sv',
  lin: 'ln', som: 'so', rus: 'ru', ukr: 'uk', bel: 'be', bul: 'bg', kaz: 'kk', arb: 'ar', urd: 'ur', pes: 'fa', pbu: 'ps',
  hin: 'hi', mar: 'mr', npi: 'ne', cmn: 'zh', ben: 'bn', jpn: 'ja', kor: 'ko', tel: 'te', tam: 'ta', guj: 'gu', kan: 'kn',
  mal: 'ml', mya: 'my', pan: 'pa', amh: 'am', tha: 'th', sin: 'si', ell: 'el',
});

/** The text the detector reads: the body's start, URLs, addresses and digits dropped. */
export function languageSample(text: string): string {
  return text.slice(0, LANGUAGE_MAX_CHARS * 2)
    .replace(/\b(?:https?:\/\/|www\.)\S+/gi, ' ')
    .replace(/\S+@\S+/g, ' ')
    .replace(/[\d_]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, LANGUAGE_MAX_CHARS);
}

/** The language code of `text`, or null (too short, or undetermined). */
export async function detectLanguage(text: string): Promise<string | null> {
  const sample = languageSample(text);
  const letters = sample.match(/\p{L}/gu)?.length ?? 0;
  if (letters < LANGUAGE_MIN_LETTERS) return null;
  const { francAll } = await import('franc-min');
  const [best, next] = francAll(sample, { minLength: LANGUAGE_MIN_LETTERS });
  if (!best || best[0] === 'und') return null;
  // a line or two: trigrams barely tell close guesses apart ("Your verification code is 482913. It
  // expires in 10 minutes." scores French 1, English 0.89): null unless the best one clearly leads
  if (letters < LANGUAGE_SURE_LETTERS && next && next[1] > 1 - SHORT_LEAD) return null;
  return TWO_LETTER[best[0]] ?? best[0];
}
