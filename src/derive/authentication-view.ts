// The registry's entry for the authentication verdicts (registry.ts lists it with every view): in
// a file of its own, so the `verdicts` lane's worker loads it without the other views' rules.
import { temperrorVerdict, type Authentication } from '../domain/authentication.ts';
import type { AuthTask } from './authenticate.ts';
import { nullable, type Entry } from './entry.ts';
import { headerBlock } from './head.ts';

/** The authentication verdicts: computed after ingest on the `verdicts` lane, kept beside the message. */
export interface VerdictsView extends Entry<'authentication'> {
  stage: 'verdicts';
  derive(raw: Uint8Array, task: AuthTask): Promise<Authentication>;
  fallback(task: AuthTask, why: string): Authentication;
}

/** Fields whose checks hash the body (DKIM's and ARC's); with none of them, the body changes no verdict. */
const BODY_CHECKED = /^(?:dkim-signature|arc-seal|arc-message-signature)[ \t]*:/im;
/** A header block longer than this is passed whole, unsearched (hostile input; the checks cap it). */
const HEAD_SEARCH_MAX = 256 * 1024;

/**
 * What the checks read of a message: the whole message when it carries a DKIM signature or an ARC
 * set (their hashes cover the body), else a copy of its header block alone. SPF reads the envelope,
 * DMARC the From field and the SPF and DKIM results, so for such a message the body changes nothing
 * but the time mailauth spends streaming it (most of a verdict's cost for a 1 MB message).
 */
export function verdictsInput(raw: Uint8Array): Uint8Array {
  const { head, body } = headerBlock(raw);
  if (body.byteLength === 0 || head.byteLength > HEAD_SEARCH_MAX) return raw;
  if (BODY_CHECKED.test(Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString('latin1'))) return raw;
  return new Uint8Array(head); // a copy (a Buffer's slice() would share the bytes)
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

