// The authentication verdicts of a received message (SPF, DKIM, DMARC, ARC): the wire shape of
// issue 25, computed by derive/authenticate.ts and kept beside the message (services/authentication.ts).

/** RFC 8601 result words. */
export type AuthResult = 'pass' | 'fail' | 'softfail' | 'neutral' | 'none' | 'temperror' | 'permerror' | 'policy';

/** The wire shape of the verdicts (issue 25); kept as JSON beside the message. */
export interface Authentication {
  spf: { result: AuthResult; domain: string | null };
  dkim: { result: AuthResult; domain: string; selector: string; aligned: boolean; comment?: string }[];
  dmarc: { result: AuthResult; domain: string | null; policy: string | null };
  arc: { result: AuthResult };
  header: string;
}


/** The three results an agent or a reader looks at first: SPF, the DKIM signatures together, DMARC. */
export interface AuthSummary {
  spf: AuthResult;
  /** `none` when unsigned; `pass` when a signature passes; else the first signature's result. */
  dkim: AuthResult;
  dmarc: AuthResult;
}

export function authSummary(a: Authentication): AuthSummary {
  const dkim = a.dkim.length === 0 ? 'none' : a.dkim.some((d) => d.result === 'pass') ? 'pass' : a.dkim[0].result;
  return { spf: a.spf.result, dkim, dmarc: a.dmarc.result };
}

/** One line: "SPF pass (acme.test), DKIM pass (acme.test), DMARC pass (acme.test, p=reject)". */
export function authLine(a: Authentication): string {
  const s = authSummary(a);
  const spf = `SPF ${s.spf}${a.spf.domain ? ` (${a.spf.domain})` : ''}`;
  const domains = [...new Set(a.dkim.map((d) => d.domain))].slice(0, 3);
  const dkim = `DKIM ${s.dkim}${domains.length ? ` (${domains.join(', ')})` : ''}`;
  const dmarc = `DMARC ${s.dmarc}${a.dmarc.domain ? ` (${a.dmarc.domain}${a.dmarc.policy ? `, p=${a.dmarc.policy}` : ''})` : ''}`;
  return `${spf}, ${dkim}, ${dmarc}`;
}

/** Plain-words reasons for what did not pass (empty when nothing failed). */
export function authHints(a: Authentication): string[] {
  const out: string[] = [];
  const spf = a.spf.result;
  if (spf === 'fail') out.push(`SPF fail: ${a.spf.domain ?? 'the sender domain'} does not allow the sending server's address to send its mail`);
  else if (spf === 'softfail') out.push(`SPF softfail: ${a.spf.domain ?? 'the sender domain'} does not list the sending server's address (~all)`);
  else if (spf === 'none') out.push(`SPF none: ${a.spf.domain ?? 'the sender domain'} publishes no SPF record`);
  for (const d of a.dkim) {
    if (d.result === 'pass') {
      if (!d.aligned) out.push(`DKIM signature of ${d.domain} passes but is not aligned with the From domain (a third party signed it)`);
      continue;
    }
    if (/body hash/i.test(d.comment ?? '')) out.push(`DKIM body hash did not verify: the body changed after signing (${d.domain})`);
    else out.push(`DKIM ${d.result} for ${d.domain}${d.comment ? `: ${d.comment}` : ''}`);
  }
  if (a.dkim.length === 0) out.push('DKIM none: the message is not signed');
  if (a.dmarc.result === 'fail') out.push(`DMARC fail: neither SPF nor DKIM passed for the From domain ${a.dmarc.domain ?? ''}${a.dmarc.policy ? ` (its policy p=${a.dmarc.policy} asks receivers to act on this)` : ''}`.trimEnd());
  if ([spf, a.dmarc.result, ...a.dkim.map((d) => d.result)].includes('temperror')) out.push('temperror: a DNS lookup failed or timed out; the verdict may differ with DNS reachable');
  return out;
}

/** The verdict when the checks could not even run (no time left, a library error). */
export function temperrorVerdict(task: { envelope: { helo: string; mailFrom: string }; authservId: string }, why: string): Authentication {
  const spfDomain = domainOf(task.envelope.mailFrom) ?? (task.envelope.helo || null);
  return {
    spf: { result: 'temperror', domain: spfDomain },
    dkim: [],
    dmarc: { result: 'temperror', domain: null, policy: null },
    arc: { result: 'temperror' },
    header: `${task.authservId}; spf=temperror (${why}); dkim=temperror; dmarc=temperror; arc=temperror`,
  };
}

/** The domain of an address, lowercase, without a trailing dot; null when none. */
export const domainOf = (address: string): string | null => {
  const at = address.lastIndexOf('@');
  const d = at < 0 ? '' : address.slice(at + 1).trim().toLowerCase().replace(/\.$/, '');
  return d || null;
};

