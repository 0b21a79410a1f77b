// The registry's entry for the authentication verdicts (registry.ts lists it with every view): in
// a file of its own, so the `verdicts` lane's worker loads it without the other views' rules.
import { temperrorVerdict, type Authentication } from '../domain/authentication.ts';
import type { AuthTask } from './authenticate.ts';
import { nullable, type Entry } from './entry.ts';
import { headerBlock, unsignedHead } from './head.ts';

/** The authentication verdicts: computed after ingest on the `verdicts` lane, kept beside the message. */
export interface VerdictsView extends Entry<'authentication'> {
  stage: 'verdicts';
  derive(raw: Uint8Array, task: AuthTask): Promise<Authentication>;
  fallback(task: AuthTask, why: string): Authentication;
}

/** A header block longer than this is passed whole, unsearched, by ingest (the worker cuts it). */
const HEAD_SEARCH_MAX = 256 * 1024;

/**
 * What the checks read of a message, as ingest hands it over: the whole message when it carries a
 * DKIM signature or an ARC set (their hashes cover the body), else a copy of the fields they read
 * (`unsignedHead`: From, Return-Path, ARC-Authentication-Results). SPF reads the envelope, DMARC the
 * From field and the SPF and DKIM results, so for such a message the rest changes nothing but the
 * time mailauth spends reading it (most of a verdict's cost for a 1 MB message). A header block over
 * HEAD_SEARCH_MAX is not searched here, on the main thread: the worker cuts it (authenticate.ts).
 */
export function verdictsInput(raw: Uint8Array): Uint8Array {
  const split = headerBlock(raw);
  if (split.body.byteLength === 0 || split.head.byteLength > HEAD_SEARCH_MAX) return raw;
  return unsignedHead(raw, split) ?? raw;
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
  wire: {
    field: 'authentication',
    faces: ['http', 'mcp', 'page'],
    schema: nullable({ $ref: 'Authentication' }, 'SPF, DKIM, DMARC and ARC verdicts; null until computed (within seconds of arrival when DNS answers) and for mail not received over SMTP. Additive.'),
  },
};

