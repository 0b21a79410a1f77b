// A small SpamAssassin spamd client (SPAMC/1.5 over TCP, node:net): one `REPORT` request per message,
// which answers the verdict line (`Spam: True ; 1000.0 / 5.0`) and the report, whose "Content analysis
// details" table names each rule hit with its score and description (docs/sender-checks.md). Bounded:
// at most SPAM_MAX_BYTES of the message are sent, at most SPAM_MAX_REPLY_BYTES are read back, and the
// whole exchange has SPAM_TIMEOUT_MS. It never throws: a spamd that cannot be reached, stalls or
// answers an error gives a SpamError.
import { createConnection } from 'node:net';
import type { SpamRule, SpamVerdict } from '../domain/spam.ts';

export type { SpamVerdict } from '../domain/spam.ts';

/** The part of a message sent to spamd (spamc's own default limit is 500 KB). */
export const SPAM_MAX_BYTES = 512 * 1024;
/** The longest reply read (a report is a few KiB). */
const SPAM_MAX_REPLY_BYTES = 256 * 1024;
/** The whole exchange: connect, send, spamd's check, the reply. */
export const SPAM_TIMEOUT_MS = 15_000;
/** Connecting alone (a spamd that is down answers at once; a dropped packet must not take the whole budget). */
const SPAM_CONNECT_TIMEOUT_MS = 3000;
const MAX_RULES = 100;
const MAX_DESCRIPTION_CHARS = 300;

export interface SpamdTarget {
  host: string;
  port: number;
}

/** The message as sent: cut at SPAM_MAX_BYTES, at a line end when there is one. */
function bounded(raw: Uint8Array): { body: Uint8Array; truncated: boolean } {
  if (raw.byteLength <= SPAM_MAX_BYTES) return { body: raw, truncated: false };
  const head = raw.subarray(0, SPAM_MAX_BYTES);
  const lf = head.lastIndexOf(0x0a);
  return { body: lf > 0 ? head.subarray(0, lf + 1) : head, truncated: true };
}

const VERDICT = /^(true|false|yes|no)\s*;\s*(-?\d+(?:\.\d+)?)\s*\/\s*(-?\d+(?:\.\d+)?)$/i;
const RULE_LINE = /^ *(-?\d{1,4}(?:\.\d{1,4})?) +([A-Za-z0-9_.]{1,100}) +(.*)$/;
const CONTINUATION = /^ {10,}(\S.*)$/;

/** The rules of a report's "Content analysis details" table (after its `---- ----` line); order as given. */
export function parseReport(report: string): SpamRule[] {
  const rules: SpamRule[] = [];
  // the table follows the unindented "Content analysis details:" line; the content preview before it
  // (the sender's words) is indented, so it can never open the table
  let details = false;
  let inTable = false;
  for (const line of report.split('\n')) {
    const l = line.replace(/\r$/, '');
    if (!inTable) {
      if (l.startsWith('Content analysis details:')) details = true;
      else if (details && l.startsWith('----')) inTable = true;
      continue;
    }
    if (l.trim() === '') continue;
    const m = RULE_LINE.exec(l);
    if (m) {
      if (rules.length >= MAX_RULES) break;
      rules.push({ name: m[2], score: Number(m[1]), description: m[3].trim().slice(0, MAX_DESCRIPTION_CHARS) });
      continue;
    }
    const c = CONTINUATION.exec(l);
    const last = rules.at(-1);
    if (c && last) last.description = `${last.description} ${c[1].trim()}`.slice(0, MAX_DESCRIPTION_CHARS);
  }
  return rules;
}

/** Parses a whole spamd reply to REPORT. */
export function parseReply(reply: string, truncated: boolean): SpamVerdict {
  const headEnd = reply.indexOf('\r\n\r\n');
  const head = headEnd < 0 ? reply : reply.slice(0, headEnd);
  const lines = head.split('\r\n');
  const status = lines[0] ?? '';
  const sm = /^SPAMD\/\d+\.\d+ (\d+) /.exec(status);
  if (!sm || sm[1] !== '0') return { error: `spamd error: ${status.slice(0, 200) || 'empty reply'}` };
  let verdict: RegExpExecArray | null = null;
  for (const h of lines.slice(1)) {
    const colon = h.indexOf(':');
    if (colon > 0 && h.slice(0, colon).trim().toLowerCase() === 'spam') verdict = VERDICT.exec(h.slice(colon + 1).trim());
  }
  if (!verdict) return { error: 'spamd error: no Spam header in its reply' };
  const yes = /^(true|yes)$/i.test(verdict[1]);
  return {
    score: Number(verdict[2]),
    threshold: Number(verdict[3]),
    isSpam: yes,
    rules: headEnd < 0 ? [] : parseReport(reply.slice(headEnd + 4)),
    truncated,
  };
}

/** Scores one message with spamd. Never throws. */
export function checkSpam(target: SpamdTarget, raw: Uint8Array, timeoutMs = SPAM_TIMEOUT_MS): Promise<SpamVerdict> {
  const { body, truncated } = bounded(raw);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let got = 0;
    let connected = false;
    let settled = false;
    const socket = createConnection({ host: target.host, port: target.port });
    const finish = (v: SpamVerdict) => {
      if (settled) return;
      settled = true;
      clearTimeout(whole);
      clearTimeout(connecting);
      socket.destroy();
      resolve(v);
    };
    const whole = setTimeout(() => finish({ error: connected ? 'spamd timed out' : 'spamd unreachable' }), timeoutMs);
    const connecting = setTimeout(() => finish({ error: 'spamd unreachable' }), Math.min(timeoutMs, SPAM_CONNECT_TIMEOUT_MS));
    socket.on('connect', () => {
      connected = true;
      clearTimeout(connecting);
      socket.write(`REPORT SPAMC/1.5\r\nContent-length: ${body.byteLength}\r\n\r\n`);
      socket.write(body);
      socket.end(); // spamd reads Content-length bytes; the half-close tells it nothing more comes
    });
    socket.on('data', (d: Buffer) => {
      got += d.byteLength;
      if (got > SPAM_MAX_REPLY_BYTES) return finish({ error: 'spamd error: reply too long' });
      chunks.push(d);
    });
    socket.on('end', () => finish(parseReply(Buffer.concat(chunks).toString('utf8'), truncated)));
    socket.on('error', () => finish({ error: connected ? 'spamd error: connection lost' : 'spamd unreachable' }));
  });
}
