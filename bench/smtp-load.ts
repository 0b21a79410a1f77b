// A small SMTP load generator: N pooled connections, each sending messages back to back with
// PIPELINING (MAIL, RCPT and DATA in one write; the body after 354). Latency per message is from the
// first byte of its transaction to its final 250. Bounded by a message count and a time limit.
import { connect, type Socket } from 'node:net';

export interface Message {
  name: string;
  /** The message as sent after DATA: CRLF lines, dot-stuffed, ending with CRLF.CRLF */
  wire: Buffer;
  /** Size of the message itself (without SMTP framing). */
  bytes: number;
}

const CRLF = '\r\n';

function dotStuff(lines: string[]): string {
  return lines.map((l) => (l.startsWith('.') ? '.' + l : l)).join(CRLF);
}

function wrap(s: string, width: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += width) out.push(s.slice(i, i + width));
  return out;
}

const WORDS = 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua verify your account with code 482913 thanks'.split(' ');
function prose(bytes: number, seed = 1): string[] {
  const lines: string[] = [];
  let size = 0;
  let x = seed;
  while (size < bytes) {
    let line = '';
    while (line.length < 70) {
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      line += WORDS[x % WORDS.length] + ' ';
    }
    lines.push(line.trimEnd());
    size += line.length + 1;
  }
  return lines;
}

function headers(subject: string, extra: string[]): string[] {
  return [
    'From: Bench Sender <sender@bench.example>',
    'To: someone@ephemail.test',
    `Subject: ${subject}`,
    'Date: Sun, 22 Nov 2026 12:00:00 +0000',
    'Message-ID: <bench-0@bench.example>',
    'MIME-Version: 1.0',
    ...extra,
  ];
}

/** A whole message (CRLF lines) as a Message: dot-stuffed, with its end of data. */
export function messageOf(name: string, raw: string): Message {
  return finish(name, raw.replace(/\r\n$/, '').split('\r\n'));
}

function finish(name: string, lines: string[]): Message {
  const body = dotStuff(lines);
  return { name, bytes: Buffer.byteLength(body) + 2, wire: Buffer.from(body + CRLF + '.' + CRLF) };
}

/** ~`kb` KB of plain text. */
export function textMessage(kb: number): Message {
  return finish(`${kb} KB text`, [...headers('Your verification code', ['Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 7bit']), '', ...prose(kb * 1024 - 300)]);
}

/** ~`kb` KB of HTML (tables, links, styles: what the sanitizer has to chew) with a text alternative. */
export function htmlMessage(kb: number): Message {
  const rows: string[] = [];
  let size = 0;
  let i = 0;
  while (size < kb * 1024 * 0.85) {
    const row = `<tr><td style="padding:4px;color:#333" class="c${i % 7}"><a href="https://example.com/item/${i}?utm_source=bench">Item ${i}</a></td><td><b>${WORDS[i % WORDS.length]}</b> ${WORDS[(i * 7) % WORDS.length]}</td><td><img src="https://example.com/i/${i}.png" alt="x" width="10"></td></tr>`;
    rows.push(row);
    size += row.length;
    i++;
  }
  const html = `<!doctype html><html><head><style>.c1{color:red}</style></head><body><table>${rows.join('\n')}</table><script>alert(1)</script></body></html>`;
  const boundary = 'b1_bench_alt';
  return finish(`${kb} KB HTML`, [
    ...headers('Your weekly digest', [`Content-Type: multipart/alternative; boundary="${boundary}"`]),
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    ...prose(Math.round(kb * 1024 * 0.1)),
    `--${boundary}`,
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: 7bit',
    '',
    ...html.split('\n'),
    `--${boundary}--`,
  ]);
}

/** A short text with one attachment of about `kb` KB (base64 on the wire). */
export function attachmentMessage(kb: number): Message {
  const raw = Buffer.alloc(Math.round(kb * 1024 * 0.74));
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 2654435761) >>> 24;
  const boundary = 'b1_bench_mixed';
  return finish(`${kb >= 1024 ? `${kb / 1024} MB` : `${kb} KB`} with attachment`, [
    ...headers('Invoice attached', [`Content-Type: multipart/mixed; boundary="${boundary}"`]),
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    ...prose(800),
    `--${boundary}`,
    'Content-Type: application/pdf; name="invoice.pdf"',
    'Content-Disposition: attachment; filename="invoice.pdf"',
    'Content-Transfer-Encoding: base64',
    '',
    ...wrap(raw.toString('base64'), 76),
    `--${boundary}--`,
  ]);
}

export interface LoadOptions {
  host?: string;
  port: number;
  /** Several nodes: connection c goes to `ports[c % ports.length]` (round-robin; `port` is then unused). */
  ports?: number[];
  connections: number;
  messages: number;
  message: Message;
  /** Recipient for message i (default: a fixed one). */
  rcpt?: (i: number) => string;
  /** Called with the final reply of each message (after it was counted); `connection` is its session's index. */
  onReply?: (i: number, code: number, line: string, sentAt: number, at: number, connection: number) => void;
  timeoutMs?: number;
  /** Send QUIT at the end (smtp-sink and ephemail both take it). */
  quit?: boolean;
}

export interface LoadResult {
  sent: number;
  ok: number;
  failed: number;
  elapsedMs: number;
  msgsPerSec: number;
  mbPerSec: number;
  latencies: number[];
  firstError?: string;
}

/** Drives `connections` sessions until `messages` messages got their final reply (or the timeout). */
export function runLoad(o: LoadOptions): Promise<LoadResult> {
  const host = o.host ?? '127.0.0.1';
  const rcpt = o.rcpt ?? (() => 'bench@ephemail.test');
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const latencies: number[] = [];
  const started = performance.now();
  const sockets: Socket[] = [];

  return new Promise((resolveAll) => {
    let open = o.connections;
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      for (const s of sockets) s.destroy();
      const elapsedMs = performance.now() - started;
      latencies.sort((a, b) => a - b);
      resolveAll({
        sent: next,
        ok,
        failed,
        elapsedMs,
        msgsPerSec: (ok / elapsedMs) * 1000,
        mbPerSec: ((ok * o.message.bytes) / 1024 / 1024 / elapsedMs) * 1000,
        latencies,
        firstError,
      });
    };
    const timer = setTimeout(() => {
      firstError ??= `timed out after ${o.timeoutMs ?? 120_000} ms`;
      done();
    }, o.timeoutMs ?? 120_000);

    const closeOne = () => {
      open -= 1;
      if (open === 0) done();
    };

    for (let c = 0; c < o.connections; c++) {
      const sock = connect(o.ports?.length ? o.ports[c % o.ports.length] : o.port, host);
      sockets.push(sock);
      sock.setNoDelay(true);
      let buf = '';
      // phases: greet → ehlo → (mail,rcpt,data → body) * → quit
      let phase: 'greet' | 'ehlo' | 'env' | 'body' | 'quit' = 'greet';
      let envReplies = 0;
      let envOk = true;
      let current = -1;
      let sentAt = 0;
      let closed = false;
      const fail = (line: string) => {
        failed++;
        firstError ??= line;
      };
      const startMessage = () => {
        if (next >= o.messages) {
          phase = 'quit';
          if (o.quit !== false) sock.write('QUIT\r\n');
          else sock.end();
          return;
        }
        current = next++;
        sentAt = performance.now();
        envReplies = 0;
        envOk = true;
        phase = 'env';
        sock.write(`MAIL FROM:<sender@bench.example>\r\nRCPT TO:<${rcpt(current)}>\r\nDATA\r\n`);
      };
      const onLine = (line: string) => {
        if (line.length >= 4 && line[3] === '-') return; // continuation
        const code = Number(line.slice(0, 3));
        switch (phase) {
          case 'greet':
            if (code !== 220) return fail(line), sock.destroy();
            phase = 'ehlo';
            sock.write('EHLO bench.example\r\n');
            return;
          case 'ehlo':
            if (code !== 250) return fail(line), sock.destroy();
            return startMessage();
          case 'env':
            envReplies++;
            if (envReplies < 3) {
              if (code !== 250) envOk = false;
              return;
            }
            if (code !== 354 || !envOk) {
              fail(line);
              if (code === 354) {
                // the server wants data although RCPT failed: end it empty
                sock.write('.\r\n');
                phase = 'body';
                return;
              }
              sock.write('RSET\r\n');
              phase = 'body'; // the RSET reply ends this message
              return;
            }
            phase = 'body';
            sock.write(o.message.wire);
            return;
          case 'body': {
            const at = performance.now();
            if (code === 250 && envOk) {
              ok++;
              latencies.push(at - sentAt);
            } else if (envOk) fail(line);
            o.onReply?.(current, code, line, sentAt, at, c);
            if (ok + failed >= o.messages) return done();
            return startMessage();
          }
          case 'quit':
            sock.end();
            return;
        }
      };
      sock.setEncoding('latin1');
      sock.on('data', (d: string) => {
        buf += d;
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i).replace(/\r$/, '');
          buf = buf.slice(i + 1);
          onLine(line);
        }
      });
      sock.on('error', (err) => {
        if (phase !== 'quit') firstError ??= err.message;
      });
      sock.on('close', () => {
        if (closed) return;
        closed = true;
        closeOne();
      });
    }
  });
}
