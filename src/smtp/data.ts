// DATA: the message's bytes as they arrive, held against the in-flight budget (all sessions
// together, and each client's share of it), the size limit and its grace, the minimum rate, the
// `data` fault rules at its end, then ingest (services/ingest.ts) and the reply to it.
import type { SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import { mailedByOf, parseAddress } from '../domain/address.ts';
import { ipBucket } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import type { Ingest } from '../services/ingest.ts';
import type { FaultRule } from '../store/faults.ts';
import type { SmtpLimits } from './connection.ts';
import { owing, refusalReason, ruleReply, smtpError, smtpReplyFor, type SmtpError } from './replies.ts';
import type { OpenConnection, Tracked } from './session.ts';

/** One client (an IPv4 address, an IPv6 /64) holds at most this part of EPHEMAIL_MAX_INFLIGHT_BYTES. */
export const CLIENT_SHARE_OF_INFLIGHT = 1 / 4;
/**
 * A DATA over the size limit is read (and dropped) to its end for at most this many bytes past the
 * limit, then answered 552 with the session going on, as a client that did not declare SIZE
 * expects; past that (a flood), 552 at once and the connection is closed, the rest never read.
 */
export const OVERSIZE_GRACE_BYTES = 1024 * 1024;
/** After the 552 to a flood: how long the reply has to reach the client before the socket is destroyed. */
const OVERSIZED_LINGER_MS = 1000;

/** Why a chunk was not taken: `0` taken, `ALL` (every session's budget is full), `CLIENT` (this client's share is). */
export const TAKEN = 0;
export const OVER_ALL = 1;
export const OVER_CLIENT = 2;
export type Take = typeof TAKEN | typeof OVER_ALL | typeof OVER_CLIENT;

/**
 * Bytes held by messages being received, against the budget shared by every session (so 1,000
 * slow senders cannot make the process hold 1,000 × 30 MiB) and each client's share of it (so one
 * client cannot hold it all). Pure bookkeeping: what the caller takes it gives back.
 */
export interface InflightBudget {
  /** Takes `bytes` for `client` (an ipBucket), or says which limit it would pass (nothing taken). */
  take(client: string, bytes: number): Take;
  /** Gives back `bytes` `client` took. */
  give(client: string, bytes: number): void;
  /** Bytes held, all clients together, and by one client. */
  readonly held: number;
  heldBy(client: string): number;
}

export function createInflightBudget(totalBytes: number, clientShare = CLIENT_SHARE_OF_INFLIGHT): InflightBudget {
  const share = Math.floor(totalBytes * clientShare);
  let held = 0;
  /** In-flight bytes by client; absent at 0. */
  const byClient = new Map<string, number>();
  return {
    take(client, bytes) {
      const mine = byClient.get(client) ?? 0;
      if (mine + bytes > share) return OVER_CLIENT;
      if (held + bytes > totalBytes) return OVER_ALL;
      held += bytes;
      byClient.set(client, mine + bytes);
      return TAKEN;
    },
    give(client, bytes) {
      if (!bytes) return;
      held -= bytes;
      const left = (byClient.get(client) ?? 0) - bytes;
      if (left > 0) byClient.set(client, left);
      else byClient.delete(client);
    },
    get held() {
      return held;
    },
    heldBy: (client) => byClient.get(client) ?? 0,
  };
}

/**
 * The reply at the end of DATA before anything is stored: 552 over the size limit, 452 when the
 * budget (the client's share, or every session's) could not hold the message; else null.
 */
export function endOfDataRefusal(size: number, sizeExceeded: boolean, maxBytes: number, over: Take): SmtpError | null {
  if (sizeExceeded || size > maxBytes) return smtpError(552, `5.3.4 Message exceeds the maximum size of ${maxBytes} bytes`);
  if (over === OVER_CLIENT) return smtpError(452, '4.3.1 Insufficient system resources: too much mail in flight from your address, try again later');
  if (over === OVER_ALL) return smtpError(452, '4.3.1 Insufficient system resources: too much mail in flight, try again later');
  return null;
}

/** What a `data` fault rule does to the reply to DATA (docs/faults.md). */
export function dataFaultAction(rule: FaultRule): 'reply' | 'disconnect' | 'delay' {
  if (rule.reply !== null) return 'reply';
  if (rule.disconnect) return 'disconnect';
  return 'delay';
}

type Received = (err?: Error | null, message?: string) => void;

export interface DataPhaseOptions {
  core: Pick<Core, 'config' | 'log' | 'metrics'>;
  limits: SmtpLimits;
  budget: InflightBudget;
  ingest: Ingest;
  open: OpenConnection;
  dataFault(recipients: string[], session: Tracked): Promise<FaultRule | null>;
}

export function createDataPhase(options: DataPhaseOptions): { onData(stream: SMTPServerDataStream, session: SMTPServerSession, received: Received): void } {
  const { core, limits, budget, ingest, open, dataFault } = options;
  const { config } = core;
  const maxBytes = config.maxMessageBytes;

  return {
    onData(stream, session, received) {
      const tracked = session as Tracked;
      const client = ipBucket(session.remoteAddress);
      // the reply is owed (the session deadline waits for it) once the message is in, not while it arrives
      let reply = received;
      let answered = false;
      let chunks: Buffer[] = [];
      let size = 0;
      // bytes this message holds against the budget; released once, when the reply goes out or the session ends
      let held = 0;
      let over: Take = TAKEN;
      let endedAt = 0;
      const release = () => {
        chunks = [];
        budget.give(client, held);
        held = 0;
      };
      const callback: Received = (err, message) => {
        clearInterval(rate);
        release();
        if (answered) return; // a session closed by us (too large, too slow) whose stream then ends with an error
        answered = true;
        const m = core.metrics;
        if (m) {
          if (err) m.smtpRefused.inc({ reason: refusalReason(err) });
          else {
            const n = session.envelope.rcptTo.length;
            m.smtpAccepted.inc({ recipients: n === 1 ? '1' : n <= 10 ? '2-10' : '11-100' });
            m.smtpBytes.inc(size);
            if (endedAt) m.smtpAckSeconds.observe((performance.now() - endedAt) / 1000);
          }
        }
        reply(err, message);
      };
      // The minimum DATA rate: checked once a window while the message arrives.
      let sizeAtCheck = 0;
      const rate = setInterval(() => {
        if (size - sizeAtCheck >= limits.dataRateMinBytes) return void (sizeAtCheck = size);
        const c = open(session);
        const seconds = limits.dataRateWindowMs / 1000;
        core.log.info({ client: session.remoteAddress, bytes: size, window_seconds: seconds }, 'SMTP DATA too slow; connection closed');
        const err = Object.assign(smtpError(421, `4.4.2 DATA too slow: fewer than ${limits.dataRateMinBytes} bytes in ${seconds} s, closing connection`), { reason: 'too_slow' });
        callback(err); // frees the budget now (smtp-server sends nothing for it: the stream never ends)
        c?.send(421, err.message, false);
      }, limits.dataRateWindowMs);
      rate.unref();
      stream.on('data', (chunk: Buffer) => {
        if (answered) return;
        size += chunk.length;
        if (size > maxBytes) {
          release(); // nothing of it is kept: the reply is 552 whatever follows
          if (size > maxBytes + OVERSIZE_GRACE_BYTES) refuseOversized();
          return;
        }
        if (over) return;
        over = budget.take(client, chunk.length);
        if (over) return release(); // keep draining the stream, buffer nothing more
        held += chunk.length;
        chunks.push(chunk);
      });
      /**
       * Past the size limit and its grace the rest of the message is not read (the flood): 552, the
       * socket stops being read and is ended, and destroyed once the reply had time to arrive. The
       * client learns the limit from SIZE in EHLO (and a declared SIZE over it gets 552 at MAIL).
       */
      const refuseOversized = () => {
        stream.pause(); // nothing reads the stream: smtp-server's parser, then the socket, stop
        const socket = tracked.socket;
        socket?.pause();
        const err = smtpError(552, `5.3.4 Message exceeds the maximum size of ${maxBytes} bytes, closing connection`);
        core.log.info({ client: session.remoteAddress, limit: maxBytes }, 'SMTP DATA over the size limit: 552 and connection closed, the rest not read');
        callback(err);
        const c = open(session);
        if (!c) return;
        c.send(552, err.message, false);
        if (!socket || socket.destroyed) return c.close();
        socket.end();
        setTimeout(() => socket.destroy(), OVERSIZED_LINGER_MS).unref();
      };
      stream.on('error', (err) => callback(smtpReplyFor(err)));
      stream.on('end', () => {
        clearInterval(rate);
        if (answered) return;
        reply = owing(session, received);
        endedAt = performance.now();
        const refused = endOfDataRefusal(size, stream.sizeExceeded, maxBytes, over);
        if (refused) return callback(refused);
        // an unpooled buffer of its own: it is handed (not copied) to a parse worker
        const raw = Buffer.allocUnsafeSlow(size);
        let at = 0;
        for (const c of chunks) at += c.copy(raw, at);
        chunks = []; // (the socket's buffers go now: the budget is held until the reply, by `held`)
        const recipients = session.envelope.rcptTo.map((r) => parseAddress(r.address)!.address);
        const mailFrom = session.envelope.mailFrom;
        const mailedBy = mailedByOf(mailFrom ? mailFrom.address : null);
        const envelope = { clientIp: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', mailFrom: mailFrom ? mailFrom.address : '' };
        const store = () => ingest.receive(raw, recipients, mailedBy, envelope).then(
          (stored) => {
            // (debug: a line per message cost more than a tenth of ingest's CPU; metrics count the mail)
            core.log.debug({ id: stored[0]?.id, recipients: stored.length, bytes: size, from: mailFrom ? mailFrom.address : null, client: session.remoteAddress }, 'mail received');
            callback(null, `2.0.0 Ok: stored ${stored.length === 1 ? `as ${stored[0].id}` : `${stored.length} copies`}`);
          },
          (err) => {
            core.log.error({ err }, 'delivery failed; answered with a temporary error');
            callback(smtpReplyFor(err));
          },
        );
        const pending = tracked.faultData;
        if (!pending || !recipients.some((a) => pending.has(a))) return void store(); // the usual case: no rule
        dataFault(recipients, tracked).then(
          (rule) => {
            if (!rule) return void store();
            const fields = { fault_id: rule.id, address: rule.address, client: session.remoteAddress };
            const action = dataFaultAction(rule);
            if (action === 'reply') {
              core.log.info({ ...fields, reply: rule.reply }, 'SMTP fault: DATA answered as the rule says; nothing stored');
              return callback(ruleReply(rule.reply!));
            }
            if (action === 'disconnect') {
              core.log.info(fields, 'SMTP fault: connection dropped instead of the reply to DATA; nothing stored');
              open(session)?.close();
              return callback(smtpError(421, '4.4.2 Connection dropped by a fault rule')); // (not sent: the connection is closing)
            }
            core.log.info({ ...fields, delay_seconds: rule.delaySeconds }, 'SMTP fault: the reply to DATA is delayed');
            setTimeout(() => {
              if (!open(session)) {
                core.log.info(fields, 'SMTP fault: the client left during the delay; nothing stored');
                return callback(smtpError(421, '4.4.2 The client left during a delay')); // (not sent)
              }
              store();
            }, (rule.delaySeconds ?? 0) * 1000).unref(); // (a shutdown closes the connection; nothing waits for this)
          },
          (err) => {
            core.log.error({ err }, 'SMTP fault rules could not be read; answered with a temporary error');
            callback(smtpReplyFor(err));
          },
        );
      });
    },
  };
}
