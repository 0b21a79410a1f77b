// A pino logger whose lines a test can read: pass `log` to assemble() (startService's options) and
// look for records in `lines`.
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

export interface CapturedLog {
  log: Logger;
  /** Every record so far, parsed. */
  lines: Record<string, unknown>[];
  /** Records whose `msg` contains `text`. */
  find(text: string): Record<string, unknown>[];
}

export function captureLog(level = 'debug'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  let rest = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      const parts = (rest + chunk.toString('utf8')).split('\n');
      rest = parts.pop() ?? '';
      for (const l of parts) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return {
    log: pino({ level }, stream),
    lines,
    find: (text) => lines.filter((l) => typeof l.msg === 'string' && l.msg.includes(text)),
  };
}
