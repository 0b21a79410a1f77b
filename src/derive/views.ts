// The stored views document of one message, made from the registry (registry.ts) on a derivation
// worker: every `parse` view read from the one parse (message.ts), and for each `worker` view either
// its value or the input of its own task (services/views.ts runs those next, each within its budget).
// The same loop makes the full document and both fallbacks: nothing lists the views but the registry.
import type { MessageViews } from '../domain/message.ts';
import { headerOnlyMessage, minimalMessage, parseForViews, type DeriveOptions, type ParsedMessage } from './message.ts';
import { toBytes, type ParseLimits } from './mime.ts';
import { STORED_VIEWS, versionsOf, VIEWS_VERSION, type StoredView } from './registry.ts';

export type { DeriveOptions } from './message.ts';

/** The derived views, the bytes of each kept attachment (part i), and the inputs of `worker` views still to run. */
export interface DerivedMessage {
  views: MessageViews;
  parts: Uint8Array[];
  /** By view name: what its task reads (the HTML as written, cut, for the HTML check). */
  inputs: Record<string, string>;
}

/** The document of a taken-apart message: each view's value, in the registry's order. */
export function viewsOf(m: ParsedMessage, registry: readonly StoredView[] = STORED_VIEWS): DerivedMessage {
  const doc: Record<string, unknown> = { version: VIEWS_VERSION };
  const versions = versionsOf(registry);
  if (versions) doc.versions = versions;
  const inputs: Record<string, string> = {};
  for (const v of registry) {
    if (v.stage === 'parse') doc[v.name] = m.minimal ? v.fallback(m) : v.derive(m);
    else if (v.stage === 'worker') {
      const p = v.prepare(m);
      if ('input' in p) {
        inputs[v.name] = p.input;
        doc[v.name] = null; // until its task ends
      } else doc[v.name] = p.value;
    } else doc[v.name] = null; // `service` views are filled in on the main thread
  }
  doc.outcome = m.outcome;
  return { views: doc as unknown as MessageViews, parts: m.attachments.map((a) => toBytes(a.content)), inputs };
}

/** On first read: every view of the message (the parse failing gives the header-only fallback). */
export async function deriveViews(raw: Uint8Array, limits: ParseLimits, options: DeriveOptions = { html: true }): Promise<DerivedMessage> {
  return viewsOf(await parseForViews(raw, limits, options));
}

/** When the derivation ran out of time twice: the header block's fields and the body as received. */
export async function fallbackViews(raw: Uint8Array): Promise<DerivedMessage> {
  return viewsOf(await headerOnlyMessage(raw, 'parse_over_budget'));
}

/** The last fallback, made without any parser: no headers, the body as received, as text. */
export const minimalViews = (raw: Uint8Array): DerivedMessage => viewsOf(minimalMessage(raw));

/** Both steps on this thread, as the workers run them: the summary, then every view (tests, tools). */
export async function parseMessage(received: Uint8Array, limits: ParseLimits) {
  const { summarize } = await import('./summary.ts');
  const summary = await summarize(received, limits);
  const { views, parts } = await deriveViews(summary.raw, limits);
  return { ...summary, ...views, parts };
}
