// MAIL FROM and RCPT TO: the sender's syntax and its client's inbound cap, each recipient's syntax,
// domain and inbound cap, and the SMTP fault rules of the recipients (docs/faults.md): a `rcpt` rule
// answers its RCPT, a `data` rule is remembered on the session and taken at the end of DATA.
import type { SMTPServerAddress, SMTPServerSession } from 'smtp-server';
import { parseAddress, type Address } from '../domain/address.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import type { DomainRegistry, DomainState } from '../services/domains.ts';
import type { FaultRule } from '../store/faults.ts';
import { owing, ruleReply, smtpError, smtpReplyFor, type SmtpError } from './replies.ts';
import type { Tracked } from './session.ts';

export const MAX_RECIPIENTS = 100;

const CONTROL = /[\r\n\u0000]/;

/** MAIL FROM's address: a refusal (501) for one no reply could carry, else undefined. */
export function senderRefusal(address: string): SmtpError | undefined {
  return CONTROL.test(address) ? smtpError(501, '5.1.7 Bad sender address syntax') : undefined;
}

/**
 * RCPT TO's address before any I/O: the refusal (501 syntax, 553 unnameable, 550 5.1.2 a domain not
 * served, 451 the added domains never read), or the address as the service names it.
 */
export function recipientCheck(raw: string, domains: Pick<DomainRegistry, 'stateOf' | 'active'>): SmtpError | Address {
  if (CONTROL.test(raw)) return smtpError(501, '5.1.3 Bad recipient address syntax');
  const parsed = parseAddress(raw);
  if (!parsed) return smtpError(553, '5.1.3 Recipient address is not one this service can name: use local-part@domain with a dot-atom local part of at most 64 bytes');
  let state: DomainState | null;
  try {
    state = domains.stateOf(parsed.domain);
  } catch (err) {
    return smtpReplyFor(err); // the added domains were never read (store down since start): 451
  }
  if (state !== 'active') {
    const why = state === 'retired' ? 'no longer accepts' : 'does not accept';
    return smtpError(550, `5.1.2 This service ${why} mail for ${parsed.domain}; active domains: ${domains.active().join(', ')}`);
  }
  return parsed;
}

type Cap = { perMinute: number; perDay: number };
type Reply = (err?: Error | null) => void;

export interface RecipientPhase {
  onMailFrom(address: SMTPServerAddress, session: SMTPServerSession, reply: Reply): void;
  onRcptTo(address: SMTPServerAddress, session: SMTPServerSession, reply: Reply): void;
  /** At the end of DATA: the first data rule of the recipients (in their order) that applies, used once. */
  dataFault(recipients: string[], session: Tracked): Promise<FaultRule | null>;
}

export function createRecipientPhase(core: Pick<Core, 'config' | 'domains' | 'faults' | 'limiter' | 'clock' | 'log' | 'metrics'>): RecipientPhase {
  const { config } = core;
  // inbound caps (off at 0): minute windows in the shared limiter, so every node counts together
  const ipCap: Cap | null = config.smtpCaps.perIpPerMinute ? { perMinute: config.smtpCaps.perIpPerMinute, perDay: Infinity } : null;
  const addressCap: Cap | null = config.smtpCaps.perAddressPerMinute ? { perMinute: config.smtpCaps.perAddressPerMinute, perDay: Infinity } : null;

  /**
   * Counts one against an inbound cap; resolves with the error to answer (past the cap, or the
   * limiter unreachable: temporary either way) or undefined to go on.
   */
  async function capped(bucket: string, cap: Cap, name: 'ip' | 'address', fields: Record<string, string>, refusal: (retrySeconds: number) => SmtpError): Promise<SmtpError | undefined> {
    try {
      const r = await core.limiter.hit(bucket, cap, core.clock.now());
      if (r.allowed) return undefined;
      core.metrics?.smtpCapped.inc({ cap: name });
      core.log.info({ ...fields, cap: name, per_minute: cap.perMinute }, 'SMTP mail deferred: inbound cap reached');
      return refusal(r.retryAfterSeconds);
    } catch (err) {
      core.log.error({ err }, 'SMTP inbound cap could not be counted; answered with a temporary error');
      return smtpReplyFor(err);
    }
  }

  /** At RCPT: the error a fault rule answers with, or undefined (and notes data rules for the end of DATA). */
  async function faultAt(address: string, session: Tracked): Promise<SmtpError | undefined> {
    try {
      const { rule, dataRules } = await core.faults.takeFault(address, 'rcpt', core.clock.now());
      if (dataRules) (session.faultData ??= new Set()).add(address);
      else session.faultData?.delete(address);
      if (!rule?.reply) return undefined;
      core.log.info({ fault_id: rule.id, address, client: session.remoteAddress, reply: rule.reply }, 'SMTP fault: RCPT answered as the rule says');
      return ruleReply(rule.reply);
    } catch (err) {
      core.log.error({ err }, 'SMTP fault rules could not be read; answered with a temporary error');
      return smtpReplyFor(err);
    }
  }

  return {
    onMailFrom(address, session, reply) {
      const callback = owing(session, reply);
      const refused = senderRefusal(address.address);
      if (refused || !ipCap) return callback(refused);
      const client = session.remoteAddress;
      capped(`smtp-ip:${ipBucket(client)}`, ipCap, 'ip', { client }, (retry) =>
        smtpError(451, `4.7.1 Too much mail from your address: at most ${ipCap.perMinute} messages a minute, try again in ${retry} s`),
      ).then(callback);
    },
    onRcptTo(address, session, reply) {
      const callback = owing(session, reply);
      const parsed = recipientCheck(address.address, core.domains);
      if (parsed instanceof Error) return callback(parsed);
      // SMTP faults on demand: one indexed read (SQLite) or one script (Redis) per RCPT; a rule
      // answers this RCPT, and a data rule is remembered for the end of DATA
      faultAt(parsed.address, session as Tracked).then((refusal) => {
        if (refusal || !addressCap) return callback(refusal);
        capped(`smtp-rcpt:${parsed.address}`, addressCap, 'address', { client: session.remoteAddress, recipient: parsed.address }, (retry) =>
          smtpError(452, `4.2.2 ${parsed.address} is receiving too much mail: at most ${addressCap.perMinute} messages a minute, try again in ${retry} s`),
        ).then(callback);
      });
    },
    async dataFault(recipients, session) {
      const now = core.clock.now();
      for (const address of new Set(recipients)) {
        if (!session.faultData?.has(address)) continue;
        const { rule, dataRules } = await core.faults.takeFault(address, 'data', now);
        if (!dataRules) session.faultData.delete(address);
        if (rule) return rule;
      }
      return null;
    },
  };
}
