// The IMAP4rev1 server (RFC 3501 as real clients use it; docs/imap.md): one mailbox, INBOX, per
// inbox address, read from the same store as the API; receive-only. Each connection reads commands
// through the framer (parser.ts) one at a time; replies are written in order; a command that fails
// answers NO/BAD with its tag and the session goes on. Flags (\Seen, \Deleted) are the session's;
// an EXPUNGE deletes as `DELETE /api/v1/emails/{id}` does.
import type { AddressInfo, Server, Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { Core } from '../services/core.ts';
import { deleteEmail, matchTexts } from '../services/emails.ts';
import { createHoldCounter } from '../domain/limits.ts';
import { searchNeedle, FILTER_MAX_CHARS } from '../domain/search.ts';
import { AppError } from '../domain/errors.ts';
import type { UidStore } from '../store/uids.ts';
import { countRequest, listMailbox, login, readMessage, refusalOf, takeWaitSlot, type Grant, type Listed, type Refusal } from './access.ts';
import { bodyStructure, envelope, headerValue, parseSection, parseTree, sectionBytes, type Part, type Section } from './mime.ts';
import { astring, createFramer, parseCommand, type Command, type Token } from './parser.ts';
import { mailFront } from './front.ts';
import type { MailTls } from './tls.ts';
import { mailListenerOf } from '../smtp/listener.ts';

export interface MailLimits {
  /** Connections at once per client (an IPv4 address, an IPv6 /64), /56, /48: SMTP's caps. */
  maxPerIp: number;
  maxPer56: number;
  maxPer48: number;
  /** Connections at once on this node. */
  maxClients: number;
  /** Autologout after this long without a command (RFC 3501: at least 30 minutes). */
  idleMs: number;
  /** Bad commands in a row that close the session. */
  maxBadInARow: number;
}

export const DEFAULT_MAIL_LIMITS: Readonly<MailLimits> = Object.freeze({ maxPerIp: 25, maxPer56: 50, maxPer48: 100, maxClients: 1000, idleMs: 30 * 60_000, maxBadInARow: 20 });

export interface MailListener {
  listen(port: number, host: string): Promise<AddressInfo>;
  close(): Promise<void>;
  readonly sessions: number;
  readonly server: Server;
}

/** How long one IDLE wait is held before the mailbox is looked at again (expunges have no wake-up). */
const IDLE_RECHECK_MS = 30_000;
/** Raw messages a session keeps at hand (a client fetches a message's parts one after the other): a few, or the one being read when it is larger. */
const CACHE_MESSAGES = 4;
const CACHE_BYTES = 4 * 1024 * 1024;
/** BODY/TEXT search reads the search texts of at most this many emails (the API's bound), newest first. */
const TEXT_SEARCH_MAX = 200;
/** Header and size searches read at most this many messages, newest first. */
const HEADER_SEARCH_MAX = 1000;
/** Pending input (bytes) above which the socket is paused until commands are answered. */
const MAX_PENDING_INPUT = 1024 * 1024;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad = (n: number, w = 2) => String(n).padStart(w, '0');
/** INTERNALDATE: `"28-Nov-2026 04:05:06 +0000"`. */
function internalDate(ms: number): string {
  const d = new Date(ms);
  return `"${pad(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${d.getUTCFullYear()} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000"`;
}
/** An IMAP date (`1-Feb-2026`) as the UTC day's start, or null. */
function parseDate(s: string): number | null {
  const m = /^(\d{1,2})-([A-Za-z]{3})-(\d{4})$/.exec(s.trim());
  if (!m) return null;
  const month = MONTHS.findIndex((x) => x.toLowerCase() === m[2].toLowerCase());
  if (month < 0) return null;
  return Date.UTC(Number(m[3]), month, Number(m[1]));
}
const DAY = 86_400_000;

interface Message extends Listed {
  seen: boolean;
  deleted: boolean;
}

type Search =
  | { k: 'all' }
  | { k: 'flag'; flag: 'seen' | 'deleted'; want: boolean }
  | { k: 'none' }
  | { k: 'date'; op: 'since' | 'before' | 'on'; day: number }
  | { k: 'summary'; field: 'from' | 'subject'; needle: string }
  | { k: 'header'; name: string; needle: string }
  | { k: 'text'; needle: string }
  | { k: 'size'; op: 'larger' | 'smaller'; n: number }
  | { k: 'set'; uid: boolean; set: string }
  | { k: 'not'; a: Search }
  | { k: 'or'; a: Search; b: Search }
  | { k: 'and'; all: Search[] };

class Bad extends Error {}

/** A response text as one line: what a client sent (a literal may hold CR LF) never starts a line of its own. */
export const printable = (text: string) => text.replace(/[\x00-\x1f\x7f]/g, '?');

const KNOWN = new Set(['CAPABILITY', 'NOOP', 'CHECK', 'LOGOUT', 'ID', 'STARTTLS', 'LOGIN', 'AUTHENTICATE', 'ENABLE', 'NAMESPACE', 'LIST', 'LSUB', 'SUBSCRIBE', 'UNSUBSCRIBE', 'STATUS', 'SELECT', 'EXAMINE', 'CREATE', 'DELETE', 'RENAME', 'APPEND', 'CLOSE', 'UNSELECT', 'EXPUNGE', 'IDLE', 'FETCH', 'STORE', 'SEARCH', 'COPY', 'MOVE', 'UID']);

const CAPS_BASE = 'IMAP4rev1 LITERAL+ SASL-IR ID ENABLE IDLE NAMESPACE UIDPLUS UNSELECT CHILDREN';

export function createImapServer(core: Core, uids: UidStore, tls: MailTls | null, overrides: Partial<MailLimits> = {}): MailListener {
  const limits: MailLimits = { ...DEFAULT_MAIL_LIMITS, ...overrides };
  const perClient = createHoldCounter({ perAddress: limits.maxPerIp, per56: limits.maxPer56, per48: limits.maxPer48 });
  const open = new Set<Socket>();
  const metric = (command: string) => core.metrics?.mailCommands.inc({ protocol: 'imap', command: KNOWN.has(command) ? command : 'OTHER' });

  const front = mailFront(core, 'imap', limits.maxClients, (socket, ip) => {
    socket.on('error', () => undefined);
    if (open.size >= limits.maxClients) {
      socket.end('* BYE Too many connections to this server, try again later\r\n');
      return;
    }
    const release = perClient.take(ip);
    if (!release) {
      socket.end('* BYE Too many connections from your address or network, try again later\r\n');
      return;
    }
    core.metrics?.mailSessions.inc({ protocol: 'imap' });
    open.add(socket);
    session(socket, ip, () => {
      open.delete(socket);
      release();
    });
  });
  const { server } = front;

  function session(raw: Socket, ip: string, done: () => void): void {
    let sock: Socket = raw;
    let secure = false;
    const framer = createFramer();
    let state: 'notauth' | 'auth' | 'selected' | 'closed' = 'notauth';
    let grant: Grant | null = null;
    let readOnly = false;
    let box: { validity: number; next: number; messages: Message[] } | null = null;
    let badInARow = 0;
    let busy = false;
    let sinceTurn = 0;
    let ending = false;
    /** AUTHENTICATE PLAIN waiting for its response line. */
    let saslTag: string | null = null;
    /** IDLE in progress: its tag and how to end it. */
    let idle: { tag: string; stop: () => void; ended: Promise<void> } | null = null;
    const cache = new Map<string, { raw: Buffer; tree: Part | null }>();

    const write = (s: string | Buffer) => {
      if (state !== 'closed' && !sock.destroyed) sock.write(s);
    };
    const close = (bye?: string) => {
      if (state === 'closed') return;
      if (bye) write(`* BYE ${bye}\r\n`);
      state = 'closed';
      idle?.stop();
      sock.end();
      setTimeout(() => sock.destroy(), 2000).unref();
    };
    const capabilities = () => {
      const tlsCaps = tls && !secure ? ' STARTTLS LOGINDISABLED' : '';
      return state === 'notauth' ? `${CAPS_BASE}${tlsCaps}${tls && !secure ? '' : ' AUTH=PLAIN'}` : CAPS_BASE;
    };
    const plainAllowed = () => !tls || secure;

    const attach = (s: Socket) => {
      s.on('data', onData);
      // a client that half-closes after its last command still gets the answers to what it sent
      s.on('end', () => {
        ending = true;
        if (!busy) close();
      });
      s.on('close', () => {
        if (state !== 'closed') state = 'closed';
        idle?.stop();
        done();
      });
      s.setTimeout(limits.idleMs, () => close('Autologout; idle for too long'));
    };
    const onData = (chunk: Buffer) => {
      if (state === 'closed') return;
      framer.push(chunk);
      if (framer.buffered > MAX_PENDING_INPUT) raw.pause();
      pump();
    };
    attach(raw);
    write(`* OK [CAPABILITY ${capabilities()}] ephemail IMAP4rev1 ready: receive-only disposable inboxes\r\n`);

    const pump = () => {
      if (busy) return;
      busy = true;
      void (async () => {
        try {
          while (state !== 'closed') {
            const frame = framer.next();
            if (!frame) break;
            if (frame.kind === 'continue') {
              write('+ Ready for literal data\r\n');
              continue;
            }
            if (frame.kind === 'error') {
              bad(frame.tag, frame.text);
              if (frame.close) close('Literal over the limit; closing');
              continue;
            }
            if (idle) {
              const line = frame.lines.join('').trim().toUpperCase();
              const { tag } = idle;
              idle.stop();
              await idle.ended;
              idle = null;
              if (line === 'DONE') write(`${tag} OK IDLE terminated\r\n`);
              else write(`${tag} BAD Expected DONE\r\n`);
              continue;
            }
            if (saslTag !== null) {
              const tag = saslTag;
              saslTag = null;
              await finishPlain(tag, frame.lines.join('').trim());
              continue;
            }
            const parsed = parseCommand(frame.lines, frame.literals);
            if (!parsed.ok) {
              bad(parsed.tag, parsed.text);
              continue;
            }
            await run(parsed.command);
            // commands that need no I/O settle without a turn of the event loop: let it turn now and then
            if (++sinceTurn >= 16) {
              sinceTurn = 0;
              await new Promise<void>((resolve) => setImmediate(resolve));
            }
            if (sock.writableLength > MAX_PENDING_INPUT) await new Promise((resolve) => sock.once('drain', resolve));
          }
        } catch (err) {
          core.log.warn({ err }, 'imap session failed');
          close('Internal error; closing');
        } finally {
          busy = false;
          if (ending) close();
          if (state !== 'closed' && raw.isPaused() && framer.buffered <= MAX_PENDING_INPUT) raw.resume();
          // bytes may have arrived while the last command ran
          if (state !== 'closed' && !idle && framer.buffered > 0 && !busy) setImmediate(pump);
        }
      })();
    };

    const bad = (tag: string, text: string) => {
      write(`${tag} BAD ${printable(text)}\r\n`);
      if (++badInARow >= limits.maxBadInARow) close('Too many bad commands; closing');
    };
    const no = (tag: string, r: Refusal | string) => write(typeof r === 'string' ? `${tag} NO ${printable(r)}\r\n` : `${tag} NO [${r.code}] ${printable(r.text)}\r\n`);

    async function run(c: Command): Promise<void> {
      metric(c.name);
      try {
        await dispatch(c);
        badInARow = 0;
      } catch (err) {
        if (err instanceof Bad) return bad(c.tag, err.message);
        if (!(err instanceof AppError)) core.log.warn({ err, command: c.name }, 'imap command failed');
        no(c.tag, refusalOf(err));
      }
    }

    async function dispatch(c: Command): Promise<void> {
      const { tag, name, args } = c;
      switch (name) {
        case 'CAPABILITY':
          write(`* CAPABILITY ${capabilities()}\r\n${tag} OK CAPABILITY completed\r\n`);
          return;
        case 'NOOP':
        case 'CHECK':
          if (state === 'selected' && grant) {
            const r = await countRequest(core, grant);
            if (r) return no(tag, r);
            await sync(true);
          }
          write(`${tag} OK ${name} completed\r\n`);
          return;
        case 'LOGOUT':
          write('* BYE ephemail logging out\r\n');
          write(`${tag} OK LOGOUT completed\r\n`);
          close();
          return;
        case 'ID':
          write(`* ID ("name" "ephemail" "vendor" "ephemail")\r\n${tag} OK ID completed\r\n`);
          return;
        case 'STARTTLS':
          if (!tls) return no(tag, 'STARTTLS is not offered (no TLS is configured)');
          if (secure) throw new Bad('Already in TLS');
          if (state !== 'notauth') throw new Bad('STARTTLS only before login');
          write(`${tag} OK Begin TLS negotiation now\r\n`);
          startTls();
          return;
        case 'LOGIN': {
          if (state !== 'notauth') throw new Bad('Already logged in');
          if (!plainAllowed()) return no(tag, '[PRIVACYREQUIRED] Plaintext login is disabled before STARTTLS');
          const user = astring(args[0]);
          const pass = astring(args[1]);
          if (user === null || pass === null || args.length !== 2) throw new Bad('LOGIN takes a user name and a password');
          return doLogin(tag, user, pass);
        }
        case 'AUTHENTICATE': {
          if (state !== 'notauth') throw new Bad('Already logged in');
          const mech = astring(args[0])?.toUpperCase();
          if (mech !== 'PLAIN') return no(tag, 'Only AUTHENTICATE PLAIN is offered');
          if (!plainAllowed()) return no(tag, '[PRIVACYREQUIRED] Plaintext login is disabled before STARTTLS');
          const initial = astring(args[1]);
          if (initial !== null) return finishPlain(tag, initial);
          saslTag = tag;
          write('+ \r\n');
          return;
        }
        case 'ENABLE':
          needAuth();
          write(`* ENABLED\r\n${tag} OK ENABLE completed\r\n`);
          return;
        case 'NAMESPACE':
          needAuth();
          write(`* NAMESPACE (("" "/")) NIL NIL\r\n${tag} OK NAMESPACE completed\r\n`);
          return;
        case 'LIST':
        case 'LSUB': {
          needAuth();
          const ref = astring(args[0]);
          const pattern = astring(args[1]);
          if (ref === null || pattern === null) throw new Bad(`${name} takes a reference and a mailbox pattern`);
          if (pattern === '' && name === 'LIST') write('* LIST (\\Noselect) "/" ""\r\n');
          else if (matchesInbox(ref + pattern)) write(`* ${name} (\\HasNoChildren) "/" INBOX\r\n`);
          write(`${tag} OK ${name} completed\r\n`);
          return;
        }
        case 'SUBSCRIBE':
        case 'UNSUBSCRIBE':
          needAuth();
          if (!isInbox(astring(args[0]))) return no(tag, '[NONEXISTENT] The only mailbox is INBOX');
          write(`${tag} OK ${name} completed\r\n`);
          return;
        case 'STATUS': {
          needAuth();
          if (!isInbox(astring(args[0]))) return no(tag, '[NONEXISTENT] The only mailbox is INBOX');
          const items = args[1]?.kind === 'list' ? args[1].items.map((t) => astring(t)?.toUpperCase() ?? '') : null;
          if (!items) throw new Bad('STATUS takes a mailbox and a list of items');
          const r = await countRequest(core, grant!);
          if (r) return no(tag, r);
          const m = state === 'selected' && box ? box : await load();
          const unseen = m.messages.filter((x) => !('seen' in x) || !(x as Message).seen).length;
          const out: string[] = [];
          for (const it of items) {
            if (it === 'MESSAGES') out.push(`MESSAGES ${m.messages.length}`);
            else if (it === 'RECENT') out.push('RECENT 0');
            else if (it === 'UIDNEXT') out.push(`UIDNEXT ${m.next}`);
            else if (it === 'UIDVALIDITY') out.push(`UIDVALIDITY ${m.validity}`);
            else if (it === 'UNSEEN') out.push(`UNSEEN ${unseen}`);
            else throw new Bad(`Unknown STATUS item ${it.slice(0, 30)}`);
          }
          write(`* STATUS INBOX (${out.join(' ')})\r\n${tag} OK STATUS completed\r\n`);
          return;
        }
        case 'SELECT':
        case 'EXAMINE': {
          needAuth();
          if (state === 'selected') {
            state = 'auth';
            box = null;
          }
          if (!isInbox(astring(args[0]))) return no(tag, '[NONEXISTENT] The only mailbox is INBOX');
          const r = await countRequest(core, grant!);
          if (r) return no(tag, r);
          const m = await load();
          box = { validity: m.validity, next: m.next, messages: m.messages.map((x) => ({ ...x, seen: false, deleted: false })) };
          state = 'selected';
          readOnly = name === 'EXAMINE';
          write('* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n');
          write(`* OK [PERMANENTFLAGS (${readOnly ? '' : '\\Deleted \\Seen'})] Flags last for this session\r\n`);
          write(`* ${box.messages.length} EXISTS\r\n* 0 RECENT\r\n`);
          if (box.messages.length > 0) write('* OK [UNSEEN 1] First unseen\r\n');
          write(`* OK [UIDVALIDITY ${box.validity}] UIDs valid\r\n* OK [UIDNEXT ${box.next}] Predicted next UID\r\n`);
          write(`${tag} OK [${readOnly ? 'READ-ONLY' : 'READ-WRITE'}] ${name} completed\r\n`);
          return;
        }
        case 'CREATE':
        case 'DELETE':
        case 'RENAME':
        case 'APPEND':
          needAuth();
          return no(tag, '[CANNOT] This service is receive-only: mail arrives over SMTP; mailboxes cannot be created, renamed, deleted or appended to');
        case 'CLOSE':
        case 'UNSELECT': {
          needSelected();
          if (name === 'CLOSE' && !readOnly) await expunge(null, false);
          state = 'auth';
          box = null;
          write(`${tag} OK ${name} completed\r\n`);
          return;
        }
        case 'EXPUNGE': {
          needSelected();
          if (readOnly) return no(tag, '[READ-ONLY] Mailbox is read-only (EXAMINE)');
          const r = await countRequest(core, grant!);
          if (r) return no(tag, r);
          await expunge(null, true);
          write(`${tag} OK EXPUNGE completed\r\n`);
          return;
        }
        case 'IDLE': {
          needAuth();
          const r = await countRequest(core, grant!);
          if (r) return no(tag, r);
          return startIdle(tag);
        }
        case 'FETCH':
        case 'STORE':
        case 'SEARCH':
        case 'COPY':
        case 'MOVE':
          return selectedCommand(tag, name, args, false);
        case 'UID': {
          const sub = astring(args[0])?.toUpperCase() ?? '';
          if (!['FETCH', 'STORE', 'SEARCH', 'COPY', 'MOVE', 'EXPUNGE'].includes(sub)) throw new Bad('UID takes FETCH, STORE, SEARCH, COPY, MOVE or EXPUNGE');
          return selectedCommand(tag, sub, args.slice(1), true);
        }
        default:
          throw new Bad(`Unknown command ${name.slice(0, 32)}`);
      }
    }

    function needAuth() {
      if (state === 'notauth') throw new Bad('Log in first (LOGIN or AUTHENTICATE PLAIN)');
    }
    function needSelected() {
      if (state !== 'selected' || !box) throw new Bad('Select INBOX first');
    }
    const isInbox = (s: string | null) => s !== null && s.toUpperCase() === 'INBOX';
    const matchesInbox = (pattern: string) => {
      const re = new RegExp(`^${pattern.slice(0, 100).replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/%/g, '[^/]*')}$`, 'i');
      return re.test('INBOX');
    };

    async function doLogin(tag: string, user: string, pass: string) {
      const r = await login(core, user, pass, ip);
      if (!('grant' in r)) {
        no(tag, r);
        return;
      }
      grant = r.grant;
      state = 'auth';
      write(`${tag} OK [CAPABILITY ${capabilities()}] Logged in as ${grant.address}\r\n`);
    }
    async function finishPlain(tag: string, b64: string) {
      if (b64 === '*') return bad(tag, 'AUTHENTICATE cancelled');
      const decoded = /^[A-Za-z0-9+/]*={0,2}$/.test(b64) ? Buffer.from(b64, 'base64').toString('utf8') : null;
      const parts = decoded?.split('\0');
      if (!parts || parts.length !== 3) return bad(tag, 'Invalid AUTHENTICATE PLAIN response');
      return doLogin(tag, parts[1], parts[2]);
    }

    function startTls() {
      raw.removeListener('data', onData);
      raw.setTimeout(0);
      const t = new TLSSocket(raw, { isServer: true, secureContext: tls!.context() });
      t.on('error', () => close());
      t.once('secure', () => {
        secure = true;
      });
      // what the client sent after STARTTLS and before the handshake is dropped (RFC 3501 §6.2.1)
      while (framer.next()) { /* dropped */ }
      sock = t;
      t.on('data', onData);
      t.setTimeout(limits.idleMs, () => close('Autologout; idle for too long'));
    }

    async function load() {
      return listMailbox(core, uids, grant!.address);
    }

    /** Brings the session's mailbox up to date: new mail as EXISTS, and (when allowed) gone mail as EXPUNGE. */
    async function sync(expunges: boolean): Promise<boolean> {
      if (!box || !grant) return false;
      const m = await listMailbox(core, uids, grant.address);
      if (state !== 'selected' || !box) return false;
      let changed = false;
      const live = new Set(m.messages.map((x) => x.id));
      if (expunges) {
        for (let i = box.messages.length - 1; i >= 0; i--) {
          if (!live.has(box.messages[i].id)) {
            box.messages.splice(i, 1);
            write(`* ${i + 1} EXPUNGE\r\n`);
            changed = true;
          }
        }
      }
      const known = new Set(box.messages.map((x) => x.id));
      const lastUid = box.messages.at(-1)?.uid ?? 0;
      const added = m.messages.filter((x) => !known.has(x.id) && x.uid > lastUid);
      for (const x of added) box.messages.push({ ...x, seen: false, deleted: false });
      box.next = m.next;
      if (added.length > 0) {
        write(`* ${box.messages.length} EXISTS\r\n`);
        changed = true;
      }
      return changed;
    }

    function startIdle(tag: string) {
      let stopped = false;
      const abort = new AbortController();
      let finish: () => void = () => undefined;
      const ended = new Promise<void>((resolve) => (finish = resolve));
      idle = {
        tag,
        stop: () => {
          stopped = true;
          abort.abort();
        },
        ended,
      };
      write('+ idling\r\n');
      void (async () => {
        let release: (() => Promise<void>) | null = null;
        try {
          if (state !== 'selected' || !grant) {
            // nothing to watch: wait for DONE only
            await new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));
            return;
          }
          // the slot is leased for as long as an IDLE can last (the autologout), and released when it ends
          release = await takeWaitSlot(core, grant, limits.idleMs);
          if (!release) {
            write(`* NO [LIMIT] This caller already holds ${grant.maxWaits} waits (IDLE, long-polls); new mail is shown at NOOP\r\n`);
            await new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));
            return;
          }
          while (!stopped && state === 'selected') {
            // one held wait (services/wait.ts): woken through the bus when any node stores mail here
            await core.waits.hold(grant.address, IDLE_RECHECK_MS, async () => ((await sync(true)) ? [1] : []), abort.signal);
          }
        } catch (err) {
          if (!stopped) core.log.debug({ err }, 'imap idle wait ended');
          if (!stopped && err instanceof AppError && err.type === 'too_many_waiters') write(`* NO [LIMIT] ${err.message}\r\n`);
          if (!stopped) await new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));
        } finally {
          await release?.().catch(() => undefined);
          finish();
        }
      })();
    }

    async function selectedCommand(tag: string, name: string, args: Token[], uid: boolean): Promise<void> {
      needSelected();
      if (name === 'COPY' || name === 'MOVE') return no(tag, '[CANNOT] This service is receive-only: INBOX is the only mailbox, nothing can be copied or moved');
      if (name === 'EXPUNGE') {
        if (readOnly) return no(tag, '[READ-ONLY] Mailbox is read-only (EXAMINE)');
        const set = astring(args[0]);
        if (set === null || !/^[0-9:*,]+$/.test(set)) throw new Bad('UID EXPUNGE takes a UID set');
        const r = await countRequest(core, grant!);
        if (r) return no(tag, r);
        await expunge(set, true);
        write(`${tag} OK UID EXPUNGE completed\r\n`);
        return;
      }
      const r = await countRequest(core, grant!);
      if (r) return no(tag, r);
      if (name === 'FETCH') return fetch(tag, args, uid);
      if (name === 'STORE') return store(tag, args, uid);
      return search(tag, args, uid);
    }

    /** Messages of a sequence or UID set, in mailbox order, each with its sequence number. */
    function resolveSet(set: string, uid: boolean, strict = true): { msg: Message; seq: number }[] {
      if (!/^[0-9:*,]{1,4096}$/.test(set)) throw new Bad('Invalid sequence set');
      const msgs = box!.messages;
      const max = uid ? (msgs.at(-1)?.uid ?? 0) : msgs.length;
      const ranges: [number, number][] = [];
      for (const piece of set.split(',')) {
        const m = /^(\d+|\*)(?::(\d+|\*))?$/.exec(piece);
        if (!m) throw new Bad('Invalid sequence set');
        const a = m[1] === '*' ? max : Number(m[1]);
        const b = m[2] === undefined ? a : m[2] === '*' ? max : Number(m[2]);
        if ((!uid && (a === 0 || b === 0) && msgs.length > 0) || !Number.isSafeInteger(a) || !Number.isSafeInteger(b)) throw new Bad('Invalid sequence number');
        ranges.push([Math.min(a, b), Math.max(a, b)]);
        if (ranges.length > 1000) throw new Bad('Sequence set too long');
      }
      const out: { msg: Message; seq: number }[] = [];
      msgs.forEach((msg, i) => {
        const v = uid ? msg.uid : i + 1;
        if (ranges.some(([lo, hi]) => v >= lo && v <= hi)) out.push({ msg, seq: i + 1 });
      });
      if (strict && !uid && ranges.some(([, hi]) => hi > msgs.length)) throw new Bad('No such message');
      return out;
    }

    async function messageOf(msg: Message, tree: boolean): Promise<{ raw: Buffer; tree: Part | null } | null> {
      let c = cache.get(msg.id);
      if (!c) {
        const raw = await readMessage(core, msg.id);
        if (!raw) return null;
        c = { raw, tree: null };
        let bytes = raw.length;
        for (const v of cache.values()) bytes += v.raw.length;
        while (cache.size > 0 && (cache.size >= CACHE_MESSAGES || bytes > CACHE_BYTES)) {
          const [k, v] = cache.entries().next().value!;
          cache.delete(k);
          bytes -= v.raw.length;
        }
        cache.set(msg.id, c);
      }
      if (tree && !c.tree) c.tree = parseTree(c.raw);
      return c;
    }

    function fetchItems(t: Token | undefined): string[] {
      if (!t) throw new Bad('FETCH takes a set and items');
      const list = t.kind === 'list' ? t.items : [t];
      const items: string[] = [];
      for (const x of list) {
        const v = astring(x);
        if (v === null || x.kind !== 'atom') throw new Bad('Invalid FETCH item');
        const up = v.toUpperCase();
        if (up === 'ALL') items.push('FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE');
        else if (up === 'FAST') items.push('FLAGS', 'INTERNALDATE', 'RFC822.SIZE');
        else if (up === 'FULL') items.push('FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODY');
        else items.push(v);
      }
      if (items.length === 0) throw new Bad('No FETCH items');
      return items;
    }

    async function fetch(tag: string, args: Token[], uid: boolean): Promise<void> {
      const set = astring(args[0]);
      if (set === null) throw new Bad('FETCH takes a set and items');
      const items = fetchItems(args[1]);
      if (uid && !items.some((i) => i.toUpperCase() === 'UID')) items.unshift('UID');
      // checked before anything is written: a bad item is a BAD for the whole command
      type Item = { kind: 'UID' | 'FLAGS' | 'INTERNALDATE' | 'RFC822.SIZE' | 'ENVELOPE' | 'BODYSTRUCTURE' | 'BODY' | 'RFC822' | 'RFC822.HEADER' | 'RFC822.TEXT'; item: string } | { kind: 'SECTION'; item: string; peek: boolean; spec: string; section: Section; start: number | null; length: number | null };
      const plan = items.map((item): Item => {
        const up = item.toUpperCase();
        if (['UID', 'FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODYSTRUCTURE', 'BODY', 'RFC822', 'RFC822.HEADER', 'RFC822.TEXT'].includes(up)) return { kind: up as Exclude<Item['kind'], 'SECTION'>, item };
        const m = /^(BODY|BODY\.PEEK|BINARY\.PEEK|BINARY)\[([^\]]*)\](?:<(\d{1,10})(?:\.(\d{1,10}))?>)?$/i.exec(item);
        if (!m || m[1].toUpperCase().startsWith('BINARY')) throw new Bad(`Unknown FETCH item ${item.slice(0, 40)}`);
        const section = parseSection(m[2]);
        if (!section) throw new Bad(`Invalid section ${m[2].slice(0, 40)}`);
        const start = m[3] === undefined ? null : Number(m[3]);
        const length = m[4] === undefined ? null : Number(m[4]);
        if (length !== null && length === 0 && start === null) throw new Bad('Invalid partial');
        return { kind: 'SECTION', item, peek: m[1].toUpperCase() === 'BODY.PEEK', spec: m[2], section, start, length };
      });
      const targets = resolveSet(set, uid);
      const needsRaw = plan.some((p) => !['UID', 'FLAGS', 'INTERNALDATE'].includes(p.kind));
      const needsTree = plan.some((p) => p.kind === 'ENVELOPE' || p.kind === 'BODYSTRUCTURE' || p.kind === 'BODY' || p.kind === 'SECTION' || p.kind === 'RFC822.HEADER' || p.kind === 'RFC822.TEXT');
      for (const { msg, seq } of targets) {
        const m = needsRaw ? await messageOf(msg, needsTree) : null;
        if (needsRaw && !m) continue; // deleted meanwhile: shown as EXPUNGE at the next NOOP
        const out: (string | Buffer)[] = [];
        let setSeen = false;
        const literal = (b: Buffer) => out.push(`{${b.length}}\r\n`, b);
        for (const p of plan) {
          if (out.length > 0) out.push(' ');
          switch (p.kind) {
            case 'UID': out.push(`UID ${msg.uid}`); break;
            case 'FLAGS': out.push(`FLAGS (${flags(msg)})`); break;
            case 'INTERNALDATE': out.push(`INTERNALDATE ${internalDate(msg.receivedAt)}`); break;
            case 'RFC822.SIZE': out.push(`RFC822.SIZE ${m!.raw.length}`); break;
            case 'ENVELOPE': out.push(`ENVELOPE ${envelope(m!.raw, m!.tree!)}`); break;
            case 'BODYSTRUCTURE': out.push(`BODYSTRUCTURE ${bodyStructure(m!.raw, m!.tree!, true)}`); break;
            case 'BODY': out.push(`BODY ${bodyStructure(m!.raw, m!.tree!, false)}`); break;
            case 'RFC822': out.push('RFC822 '); literal(m!.raw); setSeen = true; break;
            case 'RFC822.HEADER': out.push('RFC822.HEADER '); literal(m!.raw.subarray(0, m!.tree!.bodyStart)); break;
            case 'RFC822.TEXT': out.push('RFC822.TEXT '); literal(m!.raw.subarray(m!.tree!.bodyStart)); setSeen = true; break;
            case 'SECTION': {
              let bytes = sectionBytes(m!.raw, m!.tree!, p.section) ?? Buffer.alloc(0);
              let origin = '';
              if (p.start !== null) {
                origin = `<${p.start}>`;
                bytes = bytes.subarray(Math.min(p.start, bytes.length), p.length === null ? undefined : Math.min(bytes.length, p.start + p.length));
              }
              out.push(`BODY[${p.spec}]${origin} `);
              literal(bytes);
              if (!p.peek) setSeen = true;
              break;
            }
          }
        }
        if (setSeen && !readOnly && !msg.seen) {
          msg.seen = true;
          if (!plan.some((p) => p.kind === 'FLAGS')) out.push(` FLAGS (${flags(msg)})`);
        }
        write(`* ${seq} FETCH (`);
        for (const piece of out) write(piece);
        write(')\r\n');
        if (sock.writableLength > MAX_PENDING_INPUT) await new Promise((resolve) => sock.once('drain', resolve));
        if (state === 'closed') return;
      }
      write(`${tag} OK ${uid ? 'UID ' : ''}FETCH completed\r\n`);
    }

    const flags = (m: Message) => [m.seen ? '\\Seen' : '', m.deleted ? '\\Deleted' : ''].filter(Boolean).join(' ');

    async function store(tag: string, args: Token[], uid: boolean): Promise<void> {
      const set = astring(args[0]);
      const op = astring(args[1])?.toUpperCase();
      const m = op ? /^([+-]?)FLAGS(\.SILENT)?$/.exec(op) : null;
      if (set === null || !m || !args[2]) throw new Bad('STORE takes a set, FLAGS, +FLAGS or -FLAGS, and flags');
      if (readOnly) return no(tag, '[READ-ONLY] Mailbox is read-only (EXAMINE)');
      const list = (args[2].kind === 'list' ? args[2].items : args.slice(2)).map((t) => astring(t)?.toLowerCase() ?? '');
      const seen = list.includes('\\seen');
      const deleted = list.includes('\\deleted');
      for (const { msg, seq } of resolveSet(set, uid)) {
        if (m[1] === '') {
          msg.seen = seen;
          msg.deleted = deleted;
        } else {
          const v = m[1] === '+';
          if (seen) msg.seen = v;
          if (deleted) msg.deleted = v;
        }
        if (!m[2]) write(`* ${seq} FETCH (FLAGS (${flags(msg)})${uid ? ` UID ${msg.uid}` : ''})\r\n`);
      }
      write(`${tag} OK ${uid ? 'UID ' : ''}STORE completed\r\n`);
    }

    /** Deletes the \Deleted messages (of `uidSet` when given), as the API's DELETE does; tells the client when `tell`. */
    async function expunge(uidSet: string | null, tell: boolean): Promise<void> {
      const inSet = uidSet === null ? null : new Set(resolveSet(uidSet, true).map((x) => x.msg.id));
      const msgs = box!.messages;
      for (let i = msgs.length - 1; i >= 0; i--) {
        const msg = msgs[i];
        if (!msg.deleted || (inSet && !inSet.has(msg.id))) continue;
        try {
          await deleteEmail(core, msg.id);
        } catch (err) {
          if (!(err instanceof AppError && err.type === 'not_found')) throw err;
        }
        cache.delete(msg.id);
        msgs.splice(i, 1);
        if (tell) write(`* ${i + 1} EXPUNGE\r\n`);
      }
    }

    // ---- SEARCH

    function parseSearch(args: Token[]): Search {
      let i = 0;
      const next = (): Token | undefined => args[i++];
      const str = (what: string): string => {
        const v = astring(next());
        if (v === null) throw new Bad(`SEARCH ${what} takes a value`);
        return v;
      };
      const one = (depth: number): Search => {
        if (depth > 20) throw new Bad('SEARCH nested too deep');
        const t = next();
        if (!t) throw new Bad('Incomplete SEARCH');
        if (t.kind === 'list') return { k: 'and', all: parseList(t.items, depth + 1) };
        const key = t.value.toUpperCase();
        switch (key) {
          case 'ALL': return { k: 'all' };
          case 'SEEN': return { k: 'flag', flag: 'seen', want: true };
          case 'UNSEEN': case 'NEW': return { k: 'flag', flag: 'seen', want: false };
          case 'DELETED': return { k: 'flag', flag: 'deleted', want: true };
          case 'UNDELETED': return { k: 'flag', flag: 'deleted', want: false };
          case 'ANSWERED': case 'FLAGGED': case 'DRAFT': case 'RECENT': return { k: 'none' };
          case 'UNANSWERED': case 'UNFLAGGED': case 'UNDRAFT': case 'OLD': return { k: 'all' };
          case 'KEYWORD': str('KEYWORD'); return { k: 'none' };
          case 'UNKEYWORD': str('UNKEYWORD'); return { k: 'all' };
          case 'SINCE': case 'BEFORE': case 'ON': case 'SENTSINCE': case 'SENTBEFORE': case 'SENTON': {
            const day = parseDate(str(key));
            if (day === null) throw new Bad(`${key} takes a date like 1-Feb-2026`);
            return { k: 'date', op: key.replace('SENT', '').toLowerCase() as 'since' | 'before' | 'on', day };
          }
          case 'FROM': case 'SUBJECT': {
            const v = str(key);
            if (v.length > FILTER_MAX_CHARS) throw new Bad(`${key} is at most ${FILTER_MAX_CHARS} characters`);
            return { k: 'summary', field: key.toLowerCase() as 'from' | 'subject', needle: v.toLowerCase() };
          }
          case 'TO': case 'CC': case 'BCC': return { k: 'header', name: key.toLowerCase(), needle: str(key).toLowerCase().slice(0, FILTER_MAX_CHARS) };
          case 'HEADER': {
            const name = str('HEADER').toLowerCase();
            return { k: 'header', name, needle: str('HEADER').toLowerCase().slice(0, FILTER_MAX_CHARS) };
          }
          case 'BODY': case 'TEXT': {
            const v = str(key);
            if (v.length > FILTER_MAX_CHARS) throw new Bad(`${key} is at most ${FILTER_MAX_CHARS} characters`);
            return { k: 'text', needle: searchNeedle(v) };
          }
          case 'LARGER': case 'SMALLER': {
            const v = str(key);
            if (!/^\d{1,12}$/.test(v)) throw new Bad(`${key} takes a number`);
            return { k: 'size', op: key.toLowerCase() as 'larger' | 'smaller', n: Number(v) };
          }
          case 'UID': return { k: 'set', uid: true, set: str('UID') };
          case 'NOT': return { k: 'not', a: one(depth + 1) };
          case 'OR': {
            const a = one(depth + 1);
            return { k: 'or', a, b: one(depth + 1) };
          }
          default:
            if (/^[0-9:*,]+$/.test(key)) return { k: 'set', uid: false, set: key };
            throw new Bad(`Unknown SEARCH key ${key.slice(0, 30)}`);
        }
      };
      const parseList = (items: Token[], depth: number): Search[] => {
        const saved = args;
        const savedI = i;
        args = items;
        i = 0;
        const all: Search[] = [];
        while (i < args.length) all.push(one(depth));
        args = saved;
        i = savedI;
        return all;
      };
      if (astring(args[0])?.toUpperCase() === 'CHARSET') {
        const cs = astring(args[1])?.toUpperCase();
        if (cs !== 'UTF-8' && cs !== 'US-ASCII') throw new Bad('[BADCHARSET (UTF-8 US-ASCII)] Unsupported charset');
        i = 2;
      }
      const all: Search[] = [];
      while (i < args.length) all.push(one(0));
      if (all.length === 0) throw new Bad('SEARCH takes at least one key');
      return { k: 'and', all };
    }

    async function search(tag: string, args: Token[], uid: boolean): Promise<void> {
      const query = parseSearch(args);
      const msgs = box!.messages;
      // body-text needles: the store's search texts of the newest TEXT_SEARCH_MAX emails (as the API bounds it)
      const textHits = new Map<string, Set<string>>();
      const needles: string[] = [];
      const collect = (q: Search) => {
        if (q.k === 'text') needles.push(q.needle);
        if (q.k === 'not') collect(q.a);
        if (q.k === 'or') (collect(q.a), collect(q.b));
        if (q.k === 'and') q.all.forEach(collect);
      };
      collect(query);
      const newest = msgs.slice(-TEXT_SEARCH_MAX).reverse();
      for (const n of new Set(needles)) {
        const hits = new Set<string>();
        for (let i = 0; i < newest.length; i += 25) {
          const part = newest.slice(i, i + 25);
          const r = await matchTexts(core, part.map((x) => x.id), n, core.clock.now());
          r.forEach((v, j) => v === true && hits.add(part[j].id));
        }
        textHits.set(n, hits);
      }
      const headerScan = new Set(msgs.slice(-HEADER_SEARCH_MAX).map((x) => x.id));
      const uidOf = new Map(msgs.map((m, i) => [m.id, { uid: m.uid, seq: i + 1 }]));
      const setCache = new Map<string, Set<string>>();
      const inSet = (set: string, byUid: boolean, id: string) => {
        const key = `${byUid}:${set}`;
        let s = setCache.get(key);
        if (!s) {
          s = new Set(resolveSetLenient(set, byUid).map((x) => x.msg.id));
          setCache.set(key, s);
        }
        return s.has(id);
      };
      const test = async (q: Search, m: Message): Promise<boolean> => {
        switch (q.k) {
          case 'all': return true;
          case 'none': return false;
          case 'flag': return (q.flag === 'seen' ? m.seen : m.deleted) === q.want;
          case 'date': {
            const day = Math.floor(m.receivedAt / DAY) * DAY;
            return q.op === 'since' ? day >= q.day : q.op === 'before' ? day < q.day : day === q.day;
          }
          case 'summary': return (q.field === 'from' ? m.sender : m.subject).toLowerCase().includes(q.needle);
          case 'text': return textHits.get(q.needle)?.has(m.id) ?? false;
          case 'header': {
            if (!headerScan.has(m.id)) return false;
            const c = await messageOf(m, true);
            if (!c) return false;
            const values = headerValue(c.tree!, q.name);
            return values.some((v) => v.toLowerCase().includes(q.needle)) || (q.needle === '' && values.length > 0);
          }
          case 'size': {
            if (!headerScan.has(m.id)) return false;
            const c = await messageOf(m, false);
            if (!c) return false;
            return q.op === 'larger' ? c.raw.length > q.n : c.raw.length < q.n;
          }
          case 'set': return inSet(q.set, q.uid, m.id);
          case 'not': return !(await test(q.a, m));
          case 'or': return (await test(q.a, m)) || test(q.b, m);
          case 'and':
            for (const x of q.all) if (!(await test(x, m))) return false;
            return true;
        }
      };
      const found: number[] = [];
      for (const m of msgs) if (await test(query, m)) found.push(uid ? m.uid : uidOf.get(m.id)!.seq);
      write(`* SEARCH${found.length > 0 ? ' ' + found.join(' ') : ''}\r\n${tag} OK ${uid ? 'UID ' : ''}SEARCH completed\r\n`);
    }

    /** A set in a SEARCH: numbers past the mailbox match nothing (no BAD). */
    function resolveSetLenient(set: string, uid: boolean) {
      return resolveSet(set, uid, false);
    }
  }

  return mailListenerOf(server, open, front, '* BYE Server shutting down\r\n');
}
