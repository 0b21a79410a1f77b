// The stored views document of one message, made from the registry (registry.ts) on a derivation
// worker: every `parse` view read from the one parse (message.ts), and for each `worker` view either
// its value or the input of its own task (services/views.ts runs those next, each within its budget).
// The same loop makes the full document and both fallbacks: nothing lists the views but the registry.
// A task that names a registry (registry.ts defineRegistry: the service was given one) derives that
// one's views, loaded here from its module.
import type { MessageViews } from '../domain/message.ts';
import { headerOnlyMessage, minimalMessage, parseForViews, type DeriveOptions, type ParsedMessage } from './message.ts';
import { toBytes, type ParseLimits } from './mime.ts';
import { loadRegistry, STORED_VIEWS, versionsOf, VIEWS_VERSION, type RegistrySource, type StoredView } from './registry.ts';

export type { DeriveOptions } from './message.ts';
/** A derivation's options, and the registry whose views it derives (absent: STORED_VIEWS). */
export interface ViewsOptions extends DeriveOptions {
  registry?: RegistrySource;
}

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
export async function deriveViews(raw: Uint8Array, limits: ParseLimits, options: ViewsOptions = { html: true }): Promise<DerivedMessage> {
  const registry = await loadRegistry(options.registry);
  return viewsOf(await parseForViews(raw, limits, { html: options.html }), registry);
}

/** When the derivation ran out of time twice: the header block's fields and the body as received. */
export async function fallbackViews(raw: Uint8Array, registry?: RegistrySource): Promise<DerivedMessage> {
  return viewsOf(await headerOnlyMessage(raw, 'parse_over_budget'), await loadRegistry(registry));
}

/** The last fallback, made without any parser: no headers, the body as received, as text. */
export const minimalViews = (raw: Uint8Array, registry: readonly StoredView[] = STORED_VIEWS): DerivedMessage => viewsOf(minimalMessage(raw), registry);

/** Both steps on this thread, as the workers run them: the summary, then every view (tests, tools). */
export async function parseMessage(received: Uint8Array, limits: ParseLimits) {
  const { summarize } = await import('./summary.ts');
  const summary = await summarize(received, limits);
  const { views, parts } = await deriveViews(summary.raw, limits);
  return { ...summary, ...views, parts };
}
