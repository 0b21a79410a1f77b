// SMTP faults on demand, per address (docs/faults.md): an API key makes an address's RCPT TO or end of
// DATA answer with a chosen 4xx/5xx reply, a late reply, or a dropped connection, for a number of
// transactions or until deleted. Rules are kept in the store (every node applies them) and expire
// with the inbox TTL (EPHEMAIL_EMAIL_TTL_SECONDS). The receiver's side is smtp/server.ts. Each key has
// its own share of an address (FAULTS_PER_ADDRESS); a revoked key's rules stop applying (the store);
// the operator finds and removes any key's rules (the admin API: findFaults, removeFaults).
import { randomBytes } from 'node:crypto';
import { iso } from '../domain/clock.ts';
import { AppError } from '../domain/errors.ts';
import type { FaultRule, FaultStage } from '../store/faults.ts';
import type { Core } from './core.ts';

/** What the fault functions read: the rules' own store, the domains served, time, limits, the log. */
type FaultCore = Pick<Core, 'faults' | 'domains' | 'clock' | 'config' | 'log'>;
import { resolveInbox } from './emails.ts';

/** Rules one key may have on one address (each key its own share: one key never fills an address for the others). */
export const FAULTS_PER_ADDRESS = 20;
export const FAULTS_PER_KEY = 1000;
export const FAULT_DELAY_MAX_SECONDS = 120;
export const FAULT_REPLY_MAX_CHARS = 200;
export const FAULT_TIMES_MAX = 1000;

export interface FaultInput {
  stage: FaultStage;
  reply?: string;
  delaySeconds?: number;
  disconnect?: boolean;
  times?: number;
}

// `451 4.7.1 Try again later`: a 4xx/5xx code, an enhanced status code of the same class, and text;
// printable ASCII only (an SMTP reply line), sent as written.
const REPLY = /^([45])[0-5]\d ([245])\.\d{1,3}\.\d{1,3}( [\x20-\x7e]*)?$/;

/** The reply's code and the rest of its line (what smtp-server is given as the message). */
export function splitReply(reply: string): { code: number; text: string } {
  return { code: Number(reply.slice(0, 3)), text: reply.slice(4) };
}

const bad = (message: string) => new AppError('invalid_request', message);

/** Checks a rule's fields; returns them normalised or throws invalid_request naming the field. */
export function checkFaultInput(input: FaultInput): FaultInput {
  const kinds = [input.reply !== undefined, input.delaySeconds !== undefined, input.disconnect !== undefined].filter(Boolean).length;
  if (kinds !== 1) throw bad('a fault has exactly one of reply, delay_seconds or disconnect');
  if (input.reply !== undefined) {
    const reply = input.reply;
    if (reply.length > FAULT_REPLY_MAX_CHARS) throw bad(`reply is ${reply.length} characters long; at most ${FAULT_REPLY_MAX_CHARS}`);
    if (/[\r\n]/.test(reply)) throw bad('reply must be one line');
    const m = REPLY.exec(reply);
    if (!m) {
      if (/^[123]\d\d\b/.test(reply)) throw bad(`reply ${JSON.stringify(reply.slice(0, 60))} is not an error: a fault's reply must be a 4xx or 5xx reply such as "451 4.7.1 Try again later"`);
      throw bad(`reply ${JSON.stringify(reply.slice(0, 60))} must be a 4xx or 5xx code, an enhanced status code of the same class and text in printable ASCII, such as "451 4.7.1 Try again later" or "550 5.1.1 No such user"`);
    }
    if (m[1] !== m[2]) throw bad(`reply ${JSON.stringify(reply.slice(0, 60))}: the enhanced status code's class (${m[2]}) must match the reply code's (${m[1]})`);
  } else if (input.stage !== 'data') {
    throw bad(`${input.delaySeconds !== undefined ? 'delay_seconds' : 'disconnect'} applies to stage "data" only (the final reply to DATA)`);
  }
  if (input.disconnect !== undefined && input.disconnect !== true) throw bad('disconnect must be true (omit it for another kind of fault)');
  return input;
}

/** The API's form of a rule (`Fault` in OpenAPI). */
export const toWireFault = (r: FaultRule) => ({
  id: r.id,
  address: r.address,
  stage: r.stage,
  ...(r.reply !== null ? { reply: r.reply } : {}),
  ...(r.delaySeconds !== null ? { delay_seconds: r.delaySeconds } : {}),
  ...(r.disconnect ? { disconnect: true } : {}),
  times: r.times,
  remaining: r.remaining,
  created_at: iso(r.createdAt),
  expires_at: iso(r.expiresAt),
});

function activeInbox(core: FaultCore, raw: string): string {
  const addr = resolveInbox(core, raw);
  if (core.domains.stateOf(addr.domain) !== 'active') {
    throw bad(`${addr.domain} was retired: it takes no new mail, so a fault there would never apply; active domains: ${core.domains.active().join(', ')}`);
  }
  return addr.address;
}

export async function addFault(core: FaultCore, keyHash: string, rawAddress: string, input: FaultInput): Promise<FaultRule> {
  const address = activeInbox(core, rawAddress);
  const f = checkFaultInput(input);
  const now = core.clock.now();
  const rule: FaultRule = {
    id: `flt_${randomBytes(12).toString('base64url')}`,
    keyHash, address, stage: f.stage,
    reply: f.reply ?? null, delaySeconds: f.delaySeconds ?? null, disconnect: f.disconnect === true,
    times: f.times ?? null, remaining: f.times ?? null,
    createdAt: now, expiresAt: now + core.config.emailTtlSeconds * 1000,
  };
  const r = await core.faults.addFault(rule, FAULTS_PER_ADDRESS, FAULTS_PER_KEY, now);
  if (r === 'address_full') throw new AppError('conflict', `this key already has ${FAULTS_PER_ADDRESS} fault rules on ${address}; delete one with DELETE /api/v1/inboxes/{address}/faults/{id} first`);
  if (r === 'key_full') throw new AppError('conflict', `this key already has ${FAULTS_PER_KEY} fault rules; delete some first (they also expire with the inbox TTL)`);
  core.log.info({ fault_id: rule.id, address, stage: rule.stage, reply: rule.reply, delay_seconds: rule.delaySeconds, disconnect: rule.disconnect, times: rule.times }, 'SMTP fault rule added');
  return rule;
}

export async function listFaults(core: FaultCore, keyHash: string, rawAddress: string): Promise<{ address: string; rules: FaultRule[]; others: number }> {
  const { address } = resolveInbox(core, rawAddress);
  const now = core.clock.now();
  const all = await core.faults.findFaults({ address }, now);
  return { address, rules: all.filter((r) => r.keyHash === keyHash), others: all.filter((r) => r.keyHash !== keyHash).length };
}

export async function clearFaults(core: FaultCore, keyHash: string, rawAddress: string): Promise<{ address: string; deleted: number }> {
  const { address } = resolveInbox(core, rawAddress);
  return { address, deleted: await core.faults.clearFaults(address, keyHash) };
}

export async function deleteFault(core: FaultCore, keyHash: string, rawAddress: string, id: string): Promise<void> {
  const { address } = resolveInbox(core, rawAddress);
  if (!(await core.faults.deleteFault(address, keyHash, id))) throw new AppError('not_found', `this key has no fault rule ${JSON.stringify(id.slice(0, 60))} on ${address}`);
}

/** The operator's choice of rules: an address's (every key's), the rules of keys (by hash), or both. */
export interface FaultSelection {
  address?: string;
  keyHashes?: string[];
}

async function selected(core: FaultCore, sel: FaultSelection): Promise<{ address?: string; hashes: (string | undefined)[] }> {
  const address = sel.address === undefined ? undefined : resolveInbox(core, sel.address).address;
  if (address === undefined && sel.keyHashes === undefined) throw bad('name the rules: address, key_prefix or both');
  return { address, hashes: sel.keyHashes ?? [undefined] };
}

/** Every key's rules matching the selection, revoked keys' too (the operator's view), in creation order. */
export async function findFaults(core: FaultCore, sel: FaultSelection): Promise<FaultRule[]> {
  const { address, hashes } = await selected(core, sel);
  const now = core.clock.now();
  const lists = await Promise.all(hashes.map((keyHash) => core.faults.findFaults((address !== undefined ? { address, keyHash } : { keyHash: keyHash as string }), now)));
  return lists.flat().sort((a, b) => a.createdAt - b.createdAt);
}

/** Removes the rules matching the selection; returns how many. */
export async function removeFaults(core: FaultCore, sel: FaultSelection): Promise<number> {
  const { address, hashes } = await selected(core, sel);
  let deleted = 0;
  for (const keyHash of hashes) deleted += await core.faults.removeFaults(address !== undefined ? { address, keyHash } : { keyHash: keyHash as string });
  if (deleted > 0) core.log.info({ address, keys: sel.keyHashes?.length, deleted }, 'SMTP fault rules removed by the operator');
  return deleted;
}
