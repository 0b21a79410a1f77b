// The POP3 server (RFC 1939, RFC 2449 CAPA, RFC 5034 AUTH PLAIN, RFC 2595 STLS; docs/imap.md): the
// same login, limits and mailbox as IMAP (access.ts). UIDL is the email's id; DELE marks, QUIT
// deletes (as `DELETE /api/v1/emails/{id}` does). Lines over 8 KiB, unknown commands and bad
// arguments answer `-ERR` and the session goes on; too many in a row close it.
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { AppError } from '../domain/errors.ts';
import { createHoldCounter } from '../domain/limits.ts';
import type { Core } from '../services/core.ts';
import { deleteEmail } from '../services/emails.ts';
import type { UidStore } from '../store/uids.ts';
import { countRequest, listMailbox, login, readMessage, refusalOf, type Grant, type Listed, type Refusal } from './access.ts';
import { DEFAULT_MAIL_LIMITS, printable, type MailLimits, type MailListener } from './server.ts';
import { mailFront } from './front.ts';
import type { MailTls } from './tls.ts';
import { mailListenerOf } from '../smtp/listener.ts';

const MAX_LINE = 8192;
const KNOWN = new Set(['CAPA', 'USER', 'PASS', 'AUTH', 'STLS', 'STAT', 'LIST', 'UIDL', 'RETR', 'TOP', 'DELE', 'RSET', 'NOOP', 'QUIT', 'APOP']);

/** A message as POP3 sends it: CRLF line ends, dot-stuffed, ended by `.` (the first `lines` body lines for TOP). */
export function dotStuffed(raw: Buffer, bodyLines: number | null = null): Buffer {
  let text = raw.toString('latin1').replace(/\r?\n/g, '\r\n');
  if (bodyLines !== null) {
    const m = /\r\n\r\n/.exec(text);
    const headerEnd = m ? m.index + 4 : text.length;
    let end = headerEnd;
    for (let i = 0; i < bodyLines && end < text.length; i++) {
      const nl = text.indexOf('\r\n', end);
      end = nl < 0 ? text.length : nl + 2;
    }
    text = text.slice(0, end);
  }
  if (!text.endsWith('\r\n')) text += '\r\n';
  return Buffer.from(text.replace(/^\./gm, '..') + '.\r\n', 'latin1');
}

export function createPop3Server(core: Core, uids: UidStore, tls: MailTls | null, overrides: Partial<MailLimits> = {}): MailListener {
  const limits: MailLimits = { ...DEFAULT_MAIL_LIMITS, ...overrides };
  const perClient = createHoldCounter({ perAddress: limits.maxPerIp, per56: limits.maxPer56, per48: limits.maxPer48 });
  const open = new Set<Socket>();

  const front = mailFront(core, 'pop3', limits.maxClients, (socket, ip) => {
    socket.on('error', () => undefined);
    if (open.size >= limits.maxClients) return void socket.end('-ERR [SYS/TEMP] Too many connections to this server, try again later\r\n');
    const release = perClient.take(ip);
    if (!release) return void socket.end('-ERR [SYS/TEMP] Too many connections from your address or network, try again later\r\n');
    core.metrics?.mailSessions.inc({ protocol: 'pop3' });
    open.add(socket);
    session(socket, ip, () => {
      open.delete(socket);
      release();
    });
  });
  const { server } = front;

  function session(raw: Socket, ip: string, done: () => void) {
    let sock: Socket = raw;
    let secure = false;
    let state: 'auth' | 'trans' | 'closed' = 'auth';
    let user: string | null = null;
    let grant: Grant | null = null;
    let messages: (Listed & { deleted: boolean; size: number | null })[] = [];
    let pending: Buffer = Buffer.alloc(0);
    let discarding = false;
    let busy = false;
    let sinceTurn = 0;
    let ending = false;
    let sasl = false;
    let badInARow = 0;

    const write = (s: string | Buffer) => {
      if (!sock.destroyed && state !== 'closed') sock.write(s);
    };
    const close = (last?: string) => {
      if (state === 'closed') return;
      if (last) write(last);
      state = 'closed';
      sock.end();
      setTimeout(() => sock.destroy(), 2000).unref();
    };
    const err = (text: string) => {
      write(`-ERR ${printable(text)}\r\n`);
      if (++badInARow >= limits.maxBadInARow) close('-ERR Too many bad commands; closing\r\n');
    };
    const refuse = (r: Refusal) => {
      const code = r.code === 'AUTHENTICATIONFAILED' ? 'AUTH' : 'SYS/TEMP';
      write(`-ERR [${code}] ${r.text}\r\n`);
    };
    const onData = (chunk: Buffer) => {
      if (state === 'closed') return;
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      if (pending.length > 1024 * 1024) raw.pause();
      pump();
    };
    raw.on('data', onData);
    raw.on('end', () => {
      ending = true;
      if (!busy) close();
    });
    raw.on('close', () => {
      state = 'closed';
      done();
    });
    raw.setTimeout(limits.idleMs, () => close('-ERR Autologout; idle for too long\r\n'));
    write('+OK ephemail POP3 ready: receive-only disposable inboxes\r\n');

    const nextLine = (): string | null => {
      for (;;) {
        const lf = pending.indexOf(10);
        if (lf < 0) {
          if (pending.length > MAX_LINE) {
            discarding = true;
            pending = Buffer.alloc(0);
          }
          return null;
        }
        const line = pending.subarray(0, lf).toString('utf8').replace(/\r$/, '');
        pending = pending.subarray(lf + 1);
        if (discarding || line.length > MAX_LINE) {
          discarding = false;
          return '\u0000TOO-LONG';
        }
        return line;
      }
    };

    const pump = () => {
      if (busy) return;
      busy = true;
      void (async () => {
        try {
          for (let line = nextLine(); line !== null && state !== 'closed'; line = nextLine()) {
            await command(line);
            if (++sinceTurn >= 16) {
              sinceTurn = 0;
              await new Promise<void>((resolve) => setImmediate(resolve));
            }
            if (sock.writableLength > 1024 * 1024) await new Promise((resolve) => sock.once('drain', resolve));
          }
        } catch (e) {
          core.log.warn({ err: e }, 'pop3 session failed');
          close('-ERR Internal error; closing\r\n');
        } finally {
          busy = false;
          if (ending) close();
          if (state !== 'closed' && raw.isPaused()) raw.resume();
        }
      })();
    };

    const plainAllowed = () => !tls || secure;

    async function doLogin(name: string, pass: string) {
      const r = await login(core, name, pass, ip);
      if (!('grant' in r)) return refuse(r);
      grant = r.grant;
      const box = await listMailbox(core, uids, grant.address);
      messages = box.messages.map((m) => ({ ...m, deleted: false, size: null }));
      state = 'trans';
      write(`+OK ${grant.address} has ${messages.length} messages\r\n`);
    }

    const msgArg = (arg: string | undefined) => {
      if (!arg || !/^\d{1,9}$/.test(arg)) return null;
      const m = messages[Number(arg) - 1];
      return m && !m.deleted ? m : null;
    };
    const sizeOf = async (m: (typeof messages)[number]) => {
      if (m.size === null) m.size = (await readMessage(core, m.id))?.length ?? 0;
      return m.size;
    };

    async function command(line: string) {
      if (sasl) {
        sasl = false;
        if (line.trim() === '*') return err('AUTH cancelled');
        return plain(line.trim());
      }
      if (line === '\u0000TOO-LONG') return err(`Line longer than ${MAX_LINE} bytes`);
      const [verbRaw, ...args] = line.split(' ');
      const verb = verbRaw.toUpperCase();
      core.metrics?.mailCommands.inc({ protocol: 'pop3', command: KNOWN.has(verb) ? verb : 'OTHER' });
      try {
        await dispatch(verb, args);
      } catch (e) {
        if (!(e instanceof AppError)) core.log.warn({ err: e, command: verb }, 'pop3 command failed');
        refuse(refusalOf(e));
      }
    }

    async function plain(b64: string) {
      const decoded = /^[A-Za-z0-9+/]*={0,2}$/.test(b64) ? Buffer.from(b64, 'base64').toString('utf8').split('\0') : null;
      if (!decoded || decoded.length !== 3) return err('Invalid AUTH PLAIN response');
      return doLogin(decoded[1], decoded[2]);
    }

    async function dispatch(verb: string, args: string[]) {
      if (verb === 'QUIT') {
        if (state === 'trans') {
          for (const m of messages) {
            if (!m.deleted) continue;
            try {
              await deleteEmail(core, m.id);
            } catch (e) {
              if (!(e instanceof AppError && e.type === 'not_found')) throw e;
            }
          }
        }
        return close('+OK ephemail POP3 signing off\r\n');
      }
      if (verb === 'CAPA') {
        const caps = ['USER', 'UIDL', 'TOP', 'SASL PLAIN', 'RESP-CODES', 'AUTH-RESP-CODE', 'PIPELINING', ...(tls && !secure && state === 'auth' ? ['STLS'] : []), 'IMPLEMENTATION ephemail'];
        badInARow = 0;
        return write(`+OK Capability list follows\r\n${caps.join('\r\n')}\r\n.\r\n`);
      }
      if (verb === 'NOOP') {
        badInARow = 0;
        return write('+OK\r\n');
      }
      if (state === 'auth') {
        switch (verb) {
          case 'STLS':
            if (!tls) return err('STLS is not offered (no TLS is configured)');
            if (secure) return err('Already in TLS');
            write('+OK Begin TLS negotiation\r\n');
            raw.removeListener('data', onData);
            pending = Buffer.alloc(0);
            {
              const t = new TLSSocket(raw, { isServer: true, secureContext: tls.context() });
              t.on('error', () => close());
              t.once('secure', () => (secure = true));
              t.on('data', onData);
              sock = t;
            }
            badInARow = 0;
            return;
          case 'USER':
            if (!plainAllowed()) return err('[AUTH] Plaintext login is disabled before STLS');
            if (!args[0]) return err('USER takes an inbox address');
            user = args.join(' ');
            badInARow = 0;
            return write('+OK Send PASS\r\n');
          case 'PASS':
            if (!plainAllowed()) return err('[AUTH] Plaintext login is disabled before STLS');
            if (user === null) return err('USER first');
            badInARow = 0;
            return doLogin(user, args.join(' '));
          case 'AUTH': {
            if (!args[0]) {
              badInARow = 0;
              return write('+OK\r\nPLAIN\r\n.\r\n');
            }
            if (args[0].toUpperCase() !== 'PLAIN') return err('Only AUTH PLAIN is offered');
            if (!plainAllowed()) return err('[AUTH] Plaintext login is disabled before STLS');
            badInARow = 0;
            if (args[1]) return plain(args[1]);
            sasl = true;
            return write('+ \r\n');
          }
          default:
            return err(KNOWN.has(verb) ? 'Log in first (USER/PASS or AUTH PLAIN)' : `Unknown command ${verb.slice(0, 20)}`);
        }
      }
      // TRANSACTION
      const counted = async () => {
        const r = await countRequest(core, grant!);
        if (r) refuse(r);
        return r === null;
      };
      switch (verb) {
        case 'STAT': {
          if (!(await counted())) return;
          let total = 0;
          let n = 0;
          for (const m of messages) if (!m.deleted) (n++, (total += await sizeOf(m)));
          badInARow = 0;
          return write(`+OK ${n} ${total}\r\n`);
        }
        case 'LIST':
        case 'UIDL': {
          if (args[0] !== undefined) {
            const m = msgArg(args[0]);
            if (!m) return err('No such message');
            if (!(await counted())) return;
            badInARow = 0;
            return write(`+OK ${args[0]} ${verb === 'LIST' ? await sizeOf(m) : m.id}\r\n`);
          }
          if (!(await counted())) return;
          const out: string[] = [];
          for (let i = 0; i < messages.length; i++) if (!messages[i].deleted) out.push(`${i + 1} ${verb === 'LIST' ? await sizeOf(messages[i]) : messages[i].id}`);
          badInARow = 0;
          return write(`+OK ${out.length} messages\r\n${out.map((l) => l + '\r\n').join('')}.\r\n`);
        }
        case 'RETR':
        case 'TOP': {
          const m = msgArg(args[0]);
          if (!m) return err('No such message');
          const lines = verb === 'TOP' ? (args[1] !== undefined && /^\d{1,9}$/.test(args[1]) ? Number(args[1]) : null) : null;
          if (verb === 'TOP' && lines === null) return err('TOP takes a message number and a number of lines');
          if (!(await counted())) return;
          const bytes = await readMessage(core, m.id);
          if (!bytes) return err('[SYS/TEMP] The message was deleted or expired meanwhile');
          m.size = bytes.length;
          badInARow = 0;
          write(`+OK ${bytes.length} octets\r\n`);
          return write(dotStuffed(bytes, lines));
        }
        case 'DELE': {
          const m = msgArg(args[0]);
          if (!m) return err('No such message');
          m.deleted = true;
          badInARow = 0;
          return write(`+OK Message ${args[0]} deleted at QUIT\r\n`);
        }
        case 'RSET':
          for (const m of messages) m.deleted = false;
          badInARow = 0;
          return write(`+OK ${messages.length} messages\r\n`);
        default:
          return err(KNOWN.has(verb) ? `${verb} is not valid now` : `Unknown command ${verb.slice(0, 20)}`);
      }
    }
  }

  return mailListenerOf(server, open, front, '-ERR [SYS/TEMP] Server shutting down\r\n');
}
