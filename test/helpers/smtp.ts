// A raw SMTP client over node:net for tests that need to see the dialogue (EHLO extensions, reply
// codes, pipelining) that nodemailer hides.
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

export interface Reply {
  code: number;
  /** Every line of the reply, without the code and separator. */
  lines: string[];
  text: string;
}

export class SmtpClient {
  private buf = '';
  private waiters: ((r: Reply) => void)[] = [];
  private queued: Reply[] = [];
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      this.buf += d;
      this.drain();
    });
    socket.on('close', () => {
      this.closed = true;
      for (const w of this.waiters.splice(0)) w({ code: 0, lines: ['connection closed'], text: 'connection closed' });
    });
    socket.on('error', () => undefined);
  }

  /** `localAddress`: the client's own address (any of 127/8 on loopback, to be another peer). */
  static async open(port: number, host = '127.0.0.1', localAddress?: string): Promise<{ client: SmtpClient; greeting: Reply }> {
    const socket = connect({ port, host, localAddress });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return SmtpClient.attach(socket);
  }

  /** A client on a socket already connected (and perhaps already written to); waits for the greeting. */
  static async attach(socket: Socket): Promise<{ client: SmtpClient; greeting: Reply }> {
    const client = new SmtpClient(socket);
    const greeting = await client.read();
    return { client, greeting };
  }

  private drain() {
    for (;;) {
      const lines: string[] = [];
      let pos = 0;
      let done: Reply | null = null;
      for (;;) {
        const nl = this.buf.indexOf('\r\n', pos);
        if (nl < 0) break;
        const line = this.buf.slice(pos, nl);
        pos = nl + 2;
        lines.push(line.slice(4));
        if (line[3] !== '-') {
          done = { code: Number(line.slice(0, 3)), lines, text: lines.join('\n') };
          break;
        }
      }
      if (!done) return;
      this.buf = this.buf.slice(pos);
      const w = this.waiters.shift();
      if (w) w(done);
      else this.queued.push(done);
    }
  }

  /** The next complete (possibly multi-line) reply. */
  read(timeoutMs = 20_000): Promise<Reply> {
    const q = this.queued.shift();
    if (q) return Promise.resolve(q);
    if (this.closed) return Promise.resolve({ code: 0, lines: ['connection closed'], text: 'connection closed' });
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('SMTP reply timed out')), timeoutMs);
      this.waiters.push((r) => {
        clearTimeout(t);
        resolve(r);
      });
    });
  }

  /**
   * STARTTLS: on its 220 the connection is wrapped in TLS (any certificate accepted); the returned
   * client talks over TLS, and `tls` shows what the server presented (getPeerCertificate()).
   */
  async startTls(servername = 'ephemail.test'): Promise<{ client: SmtpClient; tls: TLSSocket; reply: Reply }> {
    const reply = await this.cmd('STARTTLS');
    if (reply.code !== 220) throw new Error(`STARTTLS refused: ${reply.code} ${reply.text}`);
    this.socket.removeAllListeners('data');
    this.socket.removeAllListeners('close');
    const tls = tlsConnect({ socket: this.socket, rejectUnauthorized: false, servername });
    await new Promise<void>((resolve, reject) => {
      tls.once('secureConnect', resolve);
      tls.once('error', reject);
    });
    return { client: new SmtpClient(tls), tls, reply };
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  async cmd(line: string): Promise<Reply> {
    this.write(`${line}\r\n`);
    return this.read();
  }

  /** Sends DATA, the (already CRLF-normalised, dot-stuffed) body and the terminator; returns the final reply. */
  async data(body: Buffer): Promise<Reply> {
    const go = await this.cmd('DATA');
    if (go.code !== 354) return go;
    this.write(body);
    const tail = body.length >= 2 && body[body.length - 2] === 13 && body[body.length - 1] === 10 ? '.\r\n' : '\r\n.\r\n';
    this.write(tail);
    return this.read(60_000);
  }

  async quit(): Promise<void> {
    if (!this.closed) {
      try {
        await this.cmd('QUIT');
      } catch {
        /* closing anyway */
      }
    }
    this.socket.destroy();
  }
}

/** RFC 5321 wire form: CRLF line endings (lone CR and LF become CRLF), dot-stuffed, ends with CRLF. */
export function toWire(raw: Buffer | string): Buffer {
  const s = Buffer.isBuffer(raw) ? raw.toString('latin1') : Buffer.from(raw, 'utf8').toString('latin1');
  let t = s.replace(/\r\n/g, '\n').replace(/\r/g, '\n').replace(/\n/g, '\r\n');
  if (!t.endsWith('\r\n')) t += '\r\n';
  t = t.replace(/^\./gm, '..');
  return Buffer.from(t, 'latin1');
}

/** One whole transaction on a fresh connection: EHLO, MAIL, RCPT..., DATA. Returns every reply. */
export async function sendRaw(
  port: number,
  opts: { from: string; to: string[]; body: Buffer | string; mailParams?: string },
): Promise<{ mail: Reply; rcpt: Reply[]; data: Reply | null }> {
  const { client } = await SmtpClient.open(port);
  try {
    await client.cmd('EHLO test.example');
    const mail = await client.cmd(`MAIL FROM:<${opts.from}>${opts.mailParams ? ` ${opts.mailParams}` : ''}`);
    const rcpt: Reply[] = [];
    for (const to of opts.to) rcpt.push(await client.cmd(`RCPT TO:<${to}>`));
    let data: Reply | null = null;
    if (mail.code === 250 && rcpt.some((r) => r.code === 250)) data = await client.data(toWire(opts.body));
    return { mail, rcpt, data };
  } finally {
    await client.quit();
  }
}

/** A minimal RFC 5322 message. */
export function message(headers: Record<string, string>, body: string): string {
  return `${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}`;
}
