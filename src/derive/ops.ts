// What a derivation task is, run the same way on a worker (worker.ts) or, until one is up, on the
// calling thread (pool.ts): the summary, the views, their header-only fallback, or one view of the
// registry that runs as a task of its own (`worker` stage, and the authentication verdicts).
// The parser and each view's rules are loaded on first use.
import type { AuthTask } from './authenticate.ts';
import type { ParseLimits } from './mime.ts';

export type Op = 'summarize' | 'derive' | 'fallback' | 'view';
/** Options of a task: the derivation's (`html`), and for `view` its name (and the verdicts' task). */
export interface OpOptions {
  html?: boolean;
  view?: string;
  auth?: AuthTask;
  /** The registry whose views to derive (registry.ts registryLane); absent: STORED_VIEWS. */
  registry?: import('./registry.ts').RegistrySource;
}

/** Loads what tasks of a lane run (the parser, or the authentication checks), so the first task finds it ready. */
export const preload = (what: 'parse' | 'authenticate'): Promise<unknown> =>
  what === 'authenticate' ? Promise.all([import('./authenticate.ts'), import('./authentication-view.ts')]) : Promise.all([import('./views.ts'), import('./summary.ts')]);

export async function runOp(op: Op, raw: Uint8Array, limits: ParseLimits, options: OpOptions): Promise<unknown> {
  if (op === 'summarize') return (await import('./summary.ts')).summarize(raw, limits);
  if (op === 'derive') return (await import('./views.ts')).deriveViews(raw, limits, { html: options.html ?? true, registry: options.registry });
  if (op === 'fallback') return (await import('./views.ts')).fallbackViews(raw, options.registry);
  // the verdicts' entry alone: the `verdicts` lane loads none of the other views' rules
  if (options.view === 'authentication') {
    if (!options.auth) throw new Error('authentication without a task');
    return (await import('./authentication-view.ts')).AUTHENTICATION_VIEW.derive(raw, options.auth);
  }
  const { loadRegistry } = await import('./registry.ts');
  const view = (await loadRegistry(options.registry)).find((v) => v.name === options.view);
  if (view?.stage !== 'worker') throw new Error(`no worker view ${JSON.stringify(options.view)}`);
  return view.derive(new TextDecoder('utf-8', { fatal: false }).decode(raw));
}
