// The receiver's phases decided without a socket (src/smtp/{connection,recipients,data,replies}.ts):
// who is admitted and when the deadline closes, which RCPT is refused and how fault rules are taken,
// what the in-flight budget takes and what the end of DATA answers, and how replies are sent. The
// same behaviour over real sockets is receiver.test.ts, caps.test.ts, inflight-budget.test.ts,
// flood.test.ts and test/security/smtp.test.ts.
import assert from 'node:assert/strict';
import type { SMTPServerSession } from 'smtp-server';
import { describe, test } from 'node:test';
import { StoreFullError, StoreUnavailableError } from '../../src/domain/errors.ts';
import { atDeadline, createConnectionPolicy, DEFAULT_SMTP_LIMITS } from '../../src/smtp/connection.ts';
import { createInflightBudget, dataFaultAction, endOfDataRefusal, OVER_ALL, OVER_CLIENT, TAKEN } from '../../src/smtp/data.ts';
import { createRecipientPhase, recipientCheck, senderRefusal } from '../../src/smtp/recipients.ts';
import { owing, refusalReason, ruleReply, smtpError, smtpReplyFor, wrapSend } from '../../src/smtp/replies.ts';
import type { Connection, Tracked } from '../../src/smtp/session.ts';
import type { FaultRule } from '../../src/store/faults.ts';
import { until } from '../helpers/time.ts';

const quiet = { info: () => undefined };
const session = (remoteAddress: string, extra: Partial<Tracked> = {}) => ({ remoteAddress, envelope: { mailFrom: false, rcptTo: [] }, ...extra }) as unknown as Tracked;
const reply = (err: unknown) => {
  const e = err as { responseCode?: number; message?: string } | null | undefined;
  return e ? `${e.responseCode} ${e.message}` : 'ok';
};

describe('connection policy', () => {
  test('a client (and its network) holds at most its connections; a closed one frees its place', () => {
    const policy = createConnectionPolicy({ limits: { ...DEFAULT_SMTP_LIMITS, maxPerIp: 2, maxPer56: 3, maxPer48: 4 }, authAfterTls: false, log: quiet, open: () => undefined });
    const a = [session('192.0.2.1'), session('192.0.2.1')];
    for (const s of a) assert.equal(policy.admit(s, []), undefined);
    assert.equal(reply(policy.admit(session('192.0.2.1'), [])), '421 4.7.0 Too many connections from your address or network, try again later');
    assert.equal(policy.admit(session('192.0.2.2'), []), undefined, 'another address is not counted with it');
    for (const [i, ip] of ['2001:db8:0:1::1', '2001:db8:0:2::1', '2001:db8:0:3::1'].entries()) assert.equal(policy.admit(session(ip), []), undefined, `/64 number ${i + 1}`);
    assert.equal(reply(policy.admit(session('2001:db8:0:4::1'), [])).slice(0, 9), '421 4.7.0', 'a fourth /64 of the same /56');
    policy.closed(a[0]);
    policy.closed(a[0]); // twice: freed once
    assert.equal(policy.admit(session('192.0.2.1'), []), undefined);
    assert.notEqual(policy.admit(session('192.0.2.1'), []), undefined);
  });

  test('at the deadline: nothing for a closed connection, the reply owed first, else 421', () => {
    assert.equal(atDeadline(false, 1), 'gone');
    assert.equal(atDeadline(true, 1), 'wait');
    assert.equal(atDeadline(true, 0), 'close');
    assert.equal(atDeadline(true, undefined), 'close');
  });

  test('the deadline waits for an owed reply, then sends 421 on the session\'s connection', async () => {
    const sent: string[] = [];
    const connection = { send: (code: number, data: string) => void sent.push(`${code} ${data}`), secure: false, session: undefined as unknown } as unknown as Connection;
    const s = session('192.0.2.9');
    (connection as { session: unknown }).session = s;
    const policy = createConnectionPolicy({ limits: { ...DEFAULT_SMTP_LIMITS, sessionMs: 20 }, authAfterTls: false, log: quiet, open: (x) => (x === s ? connection : undefined) });
    s.owed = 1;
    assert.equal(policy.admit(s, [connection]), undefined);
    assert.equal(s.connection, connection, 'the session knows its connection');
    await until(() => s.deadline !== undefined, 'armed');
    // the deadline re-arms every 250 ms while a reply is owed
    await new Promise((r) => setTimeout(r, 60)); // quiet window: past the first deadline, nothing is sent while a reply is owed
    assert.deepEqual(sent, []);
    s.owed = 0;
    await until(() => sent.length > 0, 'the 421 is sent');
    assert.match(sent[0], /^421 4\.4\.2 Session time limit of 0 s reached/);
    policy.closed(s);
  });
});

describe('recipients and faults', () => {
  const domains = { stateOf: (d: string) => (d === 'mail.test' ? 'active' : d === 'old.test' ? 'retired' : null), active: () => ['mail.test'] } as const;

  test('MAIL FROM: a control character in the address is 501 5.1.7', () => {
    assert.equal(reply(senderRefusal('a\r\n@x.test')), '501 5.1.7 Bad sender address syntax');
    assert.equal(senderRefusal(''), undefined, 'the null sender');
    assert.equal(senderRefusal('a@x.test'), undefined);
  });

  test('RCPT TO: syntax, a nameable address, an active domain; the store down is temporary', () => {
    assert.equal(reply(recipientCheck('a\u0000@mail.test', domains as never)), '501 5.1.3 Bad recipient address syntax');
    assert.match(reply(recipientCheck('not an address', domains as never)), /^553 5\.1\.3 /);
    assert.equal(reply(recipientCheck('a@else.test', domains as never)), '550 5.1.2 This service does not accept mail for else.test; active domains: mail.test');
    assert.equal(reply(recipientCheck('a@old.test', domains as never)), '550 5.1.2 This service no longer accepts mail for old.test; active domains: mail.test');
    const down = { stateOf: () => { throw new StoreUnavailableError('down'); }, active: () => [] };
    assert.equal(reply(recipientCheck('a@mail.test', down as never)), '451 4.3.0 Temporary storage failure, try again later');
    assert.deepEqual(recipientCheck('Box@MAIL.test', domains as never), { address: 'box@mail.test', localPart: 'box', domain: 'mail.test' });
  });

  /** A phase over fake seams: `rules` by address and stage, taken once each. */
  function phase(rules: Record<string, Partial<FaultRule>[]>, failing = false) {
    const taken: string[] = [];
    const faults = {
      takeFault: async (address: string, stage: string) => {
        if (failing) throw new StoreUnavailableError('down');
        taken.push(`${stage}:${address}`);
        const list = rules[`${stage}:${address}`] ?? [];
        const rule = list.shift() ?? null;
        return { rule: rule && ({ id: 'flt_1', address, reply: null, disconnect: false, delaySeconds: null, ...rule } as FaultRule), dataRules: (rules[`data:${address}`]?.length ?? 0) > 0 };
      },
    };
    const log = { info: () => undefined, error: () => undefined, warn: () => undefined };
    const core = { config: { smtpCaps: { perIpPerMinute: 0, perAddressPerMinute: 0 } }, domains, faults, limiter: {}, clock: { now: () => 0 }, log, metrics: null };
    return { taken, recipients: createRecipientPhase(core as never) };
  }
  const rcpt = (p: ReturnType<typeof phase>, to: string, s: Tracked) => new Promise<string>((resolve) => p.recipients.onRcptTo({ address: to, args: {} } as never, s as SMTPServerSession, (err) => resolve(reply(err as never))));

  test('a rcpt rule answers its RCPT; a data rule is remembered for the end of DATA and taken in the recipients\' order, once', async () => {
    const p = phase({ 'rcpt:a@mail.test': [{ reply: '550 5.1.1 No such user (fault)' }], 'data:b@mail.test': [{ reply: '554 5.6.0 b' }], 'data:c@mail.test': [{ disconnect: true }] });
    const s = session('192.0.2.1');
    assert.equal(await rcpt(p, 'a@mail.test', s), '550 5.1.1 No such user (fault)');
    assert.equal(s.owed, 0, 'the reply owed was given');
    assert.equal(await rcpt(p, 'c@mail.test', s), 'ok');
    assert.equal(await rcpt(p, 'b@mail.test', s), 'ok');
    assert.deepEqual([...s.faultData!], ['c@mail.test', 'b@mail.test']);
    const first = await p.recipients.dataFault(['b@mail.test', 'c@mail.test'], s);
    assert.equal(first?.reply, '554 5.6.0 b', 'the first recipient in the message\'s order');
    assert.equal(dataFaultAction(first!), 'reply');
    const second = await p.recipients.dataFault(['b@mail.test', 'c@mail.test'], s);
    assert.equal(dataFaultAction(second!), 'disconnect');
    assert.equal(dataFaultAction({ reply: null, disconnect: false, delaySeconds: 3 } as FaultRule), 'delay');
    assert.equal(await p.recipients.dataFault(['b@mail.test', 'c@mail.test'], s), null, 'each rule is used once');
  });

  test('fault rules that cannot be read: the RCPT is answered 451', async () => {
    const p = phase({}, true);
    assert.equal(await rcpt(p, 'a@mail.test', session('192.0.2.1')), '451 4.3.0 Temporary storage failure, try again later');
  });
});

describe('DATA and the in-flight budget', () => {
  test('a client holds at most its share, all clients together at most the budget; what is given back is free again', () => {
    const budget = createInflightBudget(1000, 1 / 4);
    assert.equal(budget.take('a', 250), TAKEN);
    assert.equal(budget.take('a', 1), OVER_CLIENT, 'past its share of 250');
    assert.equal(budget.heldBy('a'), 250, 'nothing taken by a refusal');
    assert.equal(budget.take('b', 250), TAKEN);
    assert.equal(budget.take('c', 250), TAKEN);
    assert.equal(budget.take('d', 200), TAKEN);
    assert.equal(budget.take('e', 51), OVER_ALL, 'the budget holds 950: 51 more would pass it');
    assert.equal(budget.take('d', 51), OVER_CLIENT, 'a client past its share is told so first');
    budget.give('a', 250);
    assert.equal(budget.heldBy('a'), 0);
    assert.equal(budget.held, 700);
    assert.equal(budget.take('e', 250), TAKEN);
    budget.give('e', 0);
    assert.equal(budget.held, 950);
  });

  test('the end of DATA: 552 over the size limit before any budget reply, 452 by which budget, else nothing', () => {
    assert.equal(reply(endOfDataRefusal(1001, false, 1000, OVER_CLIENT)), '552 5.3.4 Message exceeds the maximum size of 1000 bytes');
    assert.equal(reply(endOfDataRefusal(10, true, 1000, TAKEN)), '552 5.3.4 Message exceeds the maximum size of 1000 bytes', 'a declared SIZE over it');
    assert.equal(reply(endOfDataRefusal(900, false, 1000, OVER_CLIENT)), '452 4.3.1 Insufficient system resources: too much mail in flight from your address, try again later');
    assert.equal(reply(endOfDataRefusal(900, false, 1000, OVER_ALL)), '452 4.3.1 Insufficient system resources: too much mail in flight, try again later');
    assert.equal(endOfDataRefusal(1000, false, 1000, TAKEN), null);
  });
});

describe('replies', () => {
  test('ingest failures are temporary; the metrics label says why a message was refused', () => {
    assert.equal(reply(smtpReplyFor(new StoreFullError('full'))), '452 4.3.1 Insufficient system storage, try again later');
    assert.equal(reply(smtpReplyFor(new StoreUnavailableError('down'))), '451 4.3.0 Temporary storage failure, try again later');
    assert.equal(reply(smtpReplyFor(new Error('x'))), '451 4.3.0 Local error in processing, try again later');
    assert.equal(refusalReason(smtpError(552, 'x')), 'too_large');
    assert.equal(refusalReason(smtpError(452, 'x')), 'no_resources');
    assert.equal(refusalReason(smtpError(451, 'x')), 'temporary_failure');
    assert.equal(refusalReason(smtpError(550, 'x')), '550');
    assert.equal(refusalReason(Object.assign(smtpError(421, 'x'), { reason: 'too_slow' })), 'too_slow');
    assert.equal(reply(ruleReply('421 4.7.0 Try later (fault)')), '421 4.7.0 Try later (fault)');
  });

  test('a reply owed is counted until its callback is called, once', () => {
    const s = session('192.0.2.1');
    const calls: unknown[] = [];
    const a = owing(s, (x: number) => void calls.push(x));
    const b = owing(s, (x: number) => void calls.push(x));
    assert.equal(s.owed, 2);
    a(1);
    a(2);
    assert.equal(s.owed, 1, 'a callback called twice counts once');
    b(3);
    assert.equal(s.owed, 0);
    assert.deepEqual(calls, [1, 2, 3]);
  });

  test('a reply naming its own enhanced code is sent as written; before TLS, EHLO lists no AUTH when AUTH waits for it', () => {
    const sent: unknown[][] = [];
    const connection = { secure: false, send: (...args: unknown[]) => void sent.push(args) } as unknown as Connection;
    wrapSend(connection, true);
    connection.send(550, '5.1.2 No such domain', 'RCPT TO');
    connection.send(550, 'No code of its own', 'RCPT TO');
    connection.send(250, ['mail.test', 'AUTH PLAIN LOGIN', 'STARTTLS'], 'EHLO');
    (connection as { secure: boolean }).secure = true;
    connection.send(250, ['mail.test', 'AUTH PLAIN LOGIN'], 'EHLO');
    assert.deepEqual(sent, [
      [550, '5.1.2 No such domain', false],
      [550, 'No code of its own', 'RCPT TO'],
      [250, ['mail.test', 'STARTTLS'], 'EHLO'],
      [250, ['mail.test', 'AUTH PLAIN LOGIN'], 'EHLO'],
    ]);
  });
});
