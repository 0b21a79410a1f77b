// The HTML compatibility check itself (types and bounds in html-check.ts): loaded only in the
// derivation workers, on the first HTML to check.
import { caniemail, rawData } from 'caniemail';
import { boundCss, HTML_CHECK_CAPS, HTML_CHECK_CLIENTS, htmlCheckError, type HtmlCheck, type HtmlCheckClient, type HtmlCheckFeature } from './html-check.ts';

export { HTML_CHECK_MAX_CHARS } from './html-check.ts';

interface RawFeature { title: string; url?: string }
const nicenames = (rawData as unknown as { nicenames: { family: Record<string, string>; platform: Record<string, string> } }).nicenames;
/** caniemail's page of each feature, by title (read-only; this module loads with the first check). */
const urls: ReadonlyMap<string, string> = new Map((rawData as unknown as { data: RawFeature[] }).data.map((f) => [f.title, f.url ?? '']));
const urlOf = (title: string) => urls.get(title) || null;
export const clientName = (id: string) => {
  const [family, platform] = id.split('.', 2);
  return `${nicenames.family[family] ?? family} ${nicenames.platform[platform] ?? platform}`;
};

const round1 = (n: number) => Math.round(n * 10) / 10;

/**
 * Checks `html` (already cut at HTML_CHECK_MAX_CHARS by the caller; `truncated` says so), its CSS
 * within HTML_CHECK_CSS (boundCss: caniemail's cost grows faster than the CSS; `truncated` then
 * too). Never throws.
 */
export function checkHtml(source: string, cutByCaller: boolean): HtmlCheck {
  const { html, cut } = boundCss(source);
  const truncated = cutByCaller || cut;
  let result: ReturnType<typeof caniemail>;
  try {
    result = caniemail({ clients: [...HTML_CHECK_CLIENTS], html });
  } catch {
    return htmlCheckError('failed', truncated);
  }
  // feature title → client → support (one finding per pair: a feature used twice counts once)
  const found = new Map<string, Map<string, { support: 'none' | 'partial'; notes: string[] }>>();
  const add = (client: string, title: string, support: 'none' | 'partial', notes: string[]) => {
    let byClient = found.get(title);
    if (!byClient) found.set(title, (byClient = new Map()));
    const had = byClient.get(client);
    if (had && (had.support === 'none' || support === 'partial')) return;
    byClient.set(client, { support, notes });
  };
  for (const [client, issues] of result.issues.errors) for (const i of issues) add(client, i.title, 'none', i.notes);
  for (const [client, issues] of result.issues.warnings) for (const i of issues) add(client, i.title, 'partial', i.notes);

  const features: HtmlCheckFeature[] = [];
  let partial = 0;
  let none = 0;
  for (const [title, byClient] of found) {
    const clients: HtmlCheckClient[] = [];
    for (const id of HTML_CHECK_CLIENTS) {
      const f = byClient.get(id);
      if (!f) continue;
      if (f.support === 'none') none++;
      else partial++;
      clients.push({
        client: id,
        name: clientName(id),
        support: f.support,
        notes: f.notes.slice(0, HTML_CHECK_CAPS.notes).map((n) => n.slice(0, HTML_CHECK_CAPS.noteChars)),
      });
    }
    features.push({ feature: title, url: urlOf(title), clients });
  }
  const weight = (f: HtmlCheckFeature) => f.clients.reduce((s, c) => s + (c.support === 'none' ? 2 : 1), 0);
  features.sort((a, b) => weight(b) - weight(a) || a.feature.localeCompare(b.feature));
  const pairs = found.size * HTML_CHECK_CLIENTS.length;
  const unsupportedPercent = pairs ? round1((none / pairs) * 100) : 0;
  const partialPercent = pairs ? round1((partial / pairs) * 100) : 0;
  return {
    supportedPercent: pairs ? round1(100 - unsupportedPercent - partialPercent) : 100,
    partialPercent,
    unsupportedPercent,
    features: features.slice(0, HTML_CHECK_CAPS.features),
    clientsChecked: [...HTML_CHECK_CLIENTS],
    truncated,
    error: null,
  };
}
