// What a derivation task is, run the same way on a worker (worker.ts) or, until one is up, on the
// calling thread (pool.ts): the summary, the views, their header-only fallback, or one view of the
// registry that runs as a task of its own (`worker` stage, and the authentication verdicts).
// The parser and each view's rules are loaded on first use.
// A derivation run on a worker may keep the inputs of its `worker` views there (`keepInputs`): the
// views' tasks that follow on the same worker (pool.ts `on`) read them from there, so an input (the
// HTML as written, for the HTML check) never crosses back to the main thread and out again.
import type { AuthTask } from './authenticate.ts';
import type { ParseLimits } from './mime.ts';
import type { DerivedMessage } from './views.ts';

export type Op = 'summarize' | 'derive' | 'fallback' | 'view';
/** Options of a task: the derivation's (`html`), and for `view` its name (and the verdicts' task). */
export interface OpOptions {
  html?: boolean;
  view?: string;
  auth?: AuthTask;
  /** The registry whose views to derive (registry.ts registryLane); absent: STORED_VIEWS. */
  registry?: import('./registry.ts').RegistrySource;
  /** A `view` task's input is the one kept on this worker by the derivation task of this id (keepInputs), not `raw`. */
  kept?: number;
}

/** A `worker` view's values should its kept input be lost or its task fail: made where the input is. */
export interface KeptView {
  over_budget: unknown;
  failed: unknown;
}
/** A derivation whose `worker` views' inputs stayed on its worker: by name, what each reads if its task cannot give a value. */
export type KeptDerivation = DerivedMessage & { kept?: Record<string, KeptView> };

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
  if (options.view === 'searchText') return (await import('./search-text.ts')).searchTextOfRaw(raw); // made when first searched
  return runView(options, new TextDecoder('utf-8', { fatal: false }).decode(raw));
}

async function workerView(options: OpOptions) {
  const { loadRegistry } = await import('./registry.ts');
  const view = (await loadRegistry(options.registry)).find((v) => v.name === options.view);
  if (view?.stage !== 'worker') throw new Error(`no worker view ${JSON.stringify(options.view)}`);
  return view;
}

/** A `worker` view's task on its input. */
export async function runView(options: OpOptions, input: string): Promise<unknown> {
  return (await workerView(options)).derive(input);
}

/**
 * Takes the `worker` views' inputs out of a derivation (to be kept by the worker that made it) and
 * puts in their place what each view reads should its task not give a value: the derivation that
 * crosses back carries no input.
 */
export async function keepInputs(derived: DerivedMessage, options: OpOptions): Promise<{ result: KeptDerivation; inputs: Record<string, string> }> {
  const inputs = derived.inputs;
  const kept: Record<string, KeptView> = {};
  for (const [name, input] of Object.entries(inputs)) {
    const view = await workerView({ ...options, view: name });
    kept[name] = { over_budget: view.fallback('over_budget', input), failed: view.fallback('failed', input) };
  }
  return { result: { ...derived, inputs: {}, kept }, inputs };
}
