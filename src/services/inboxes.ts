// Generating inbox addresses (POST /inboxes and create_inbox). Inboxes are implicit: this only
// picks an address that is empty now.
import { randomBytes } from 'node:crypto';
import { CREATE_LOCAL_PART_RE, parseAddress, randomLocalPart, type Address } from '../domain/address.ts';
import { AppError } from '../domain/errors.ts';
import type { Core } from './core.ts';

export interface CreateInboxInput {
  domain?: string;
  localPart?: string;
  /** Length of a random local part: 10 for the API, 8 for the tool endpoint (docs/contract-decisions.md). */
  randomLength: number;
}

export async function createInbox(core: Pick<Core, 'store' | 'domains' | 'clock'>, input: CreateInboxInput): Promise<Address> {
  const domain = input.domain === undefined ? core.domains.defaultDomain : input.domain.trim().toLowerCase();
  const state = core.domains.stateOf(domain);
  if (state !== 'active') {
    const why = state === 'retired' ? 'was retired: it takes no new mail' : 'is not an active domain';
    throw new AppError('invalid_request', `${JSON.stringify(input.domain)} ${why}; use one of: ${core.domains.active().join(', ')}`, { field: 'domain', hint: { kind: 'list_domains' } });
  }
  const now = core.clock.now();
  if (input.localPart !== undefined) {
    const localPart = input.localPart.toLowerCase();
    if (!CREATE_LOCAL_PART_RE.test(localPart)) {
      throw new AppError('invalid_request', 'must match ^[a-z0-9][a-z0-9._+-]{0,63}$ (letters, digits, . _ + -, starting with a letter or digit, at most 64)', { field: 'localPart' });
    }
    const address = `${localPart}@${domain}`;
    // the pattern admits "a..b" and "a.", which are not dot-atoms: no SMTP client can deliver to them
    if (!parseAddress(address)) {
      throw new AppError('invalid_request', `must not contain consecutive dots or end with a dot: ${JSON.stringify(localPart)} could never receive mail`, { field: 'localPart' });
    }
    if (await core.store.hasEmails(address, now)) {
      throw new AppError('address_in_use', `${address} already holds mail, so it cannot be handed out as empty.`, { hint: { kind: 'empty_inbox', address } });
    }
    return { address, localPart, domain };
  }
  for (let attempt = 0; attempt < 10; attempt++) {
    const localPart = randomLocalPart(input.randomLength, (n) => randomBytes(n));
    const address = `${localPart}@${domain}`;
    if (!(await core.store.hasEmails(address, now))) return { address, localPart, domain };
  }
  throw new AppError('internal_error', 'Could not find an empty random address; retry');
}
