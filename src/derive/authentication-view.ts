// The registry's entry for the authentication verdicts (registry.ts lists it with every view): in
// a file of its own, so the `verdicts` lane's worker loads it without the other views' rules.
import { temperrorVerdict, type Authentication } from '../domain/authentication.ts';
import type { AuthTask } from './authenticate.ts';
import type { Entry } from './entry.ts';

/** The authentication verdicts: computed after ingest on the `verdicts` lane, kept beside the message. */
export interface VerdictsView extends Entry<'authentication'> {
  stage: 'verdicts';
  derive(raw: Uint8Array, task: AuthTask): Promise<Authentication>;
  fallback(task: AuthTask, why: string): Authentication;
}

/** Budgets: the whole verdict, and one DNS query (an unreachable resolver costs at most this). */
export const AUTH_BUDGET = Object.freeze({ totalMs: 4000, queryMs: 1500 });

export const AUTHENTICATION_VIEW: VerdictsView = {
  name: 'authentication',
  stage: 'verdicts',
  version: 1,
  budget: AUTH_BUDGET.totalMs,
  derive: async (raw, task) => (await import('./authenticate.ts')).authenticateMessage(raw, task),
  fallback: (task, why) => temperrorVerdict(task, why),
};

