// IMAP/POP3 limits (issue 38): reads count in the HTTP API's buckets (the 61st anonymous read in a
// minute is refused, and so is the API after it), connections per client capped like SMTP's, IDLE
// holds a wait (and a key's wait slots cap it), autologout, floods (a 1 MB line, a 4 GB literal,
// 10,000 nested parentheses, 1,000 pipelined commands, garbage) answered with tagged BAD or a close,
// and a fuzz of random and mutated commands over real sockets that never goes unanswered while
// /livez answers within 50 ms.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { createImapServer } from '../../src/imap/server.ts';
import { createMemoryUids } from '../../src/store/uids.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  svc = await startService();
  await svc.send({ to: 'limits@ephemail.test', subject: 'one', text: 'x' });
});
after(async () => {
  await svc.stop();
});

/** A plain conversation: write, and read until a pattern shows. */
function open(port: number) {
  const s: Socket = connect(port, '127.0.0.1');
  let buf = '';
  let closed = false;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  s.on('data', (d) => {
    buf += d.toString('latin1');
    wake();
  });
  s.on('error', () => undefined);
  s.on('close', () => {
    closed = true;
    wake();
  });
  return {
    s,
    get all() {
      return buf;
    },
    get closed() {
      return closed;
    },
    async until(re: RegExp, ms = 10_000) {
      let late = false;
      const t = setTimeout(() => ((late = true), wake()), ms);
      try {
        while (!re.test(buf) && !closed && !late) await new Promise<void>((r) => waiters.push(r));
        if (!re.test(buf)) throw new Error(`no ${re} in ${JSON.stringify(buf.slice(-300))}`);
        return buf;
      } finally {
        clearTimeout(t);
      }
    },
    send: (line: string | Buffer) => s.write(line),
  };
}

async function livezMs(on: TestService = svc): Promise<number> {
  const t0 = performance.now();
  const r = await on.api('/livez');
  await r.text();
  assert.equal(r.status, 200);
  return performance.now() - t0;
}

test('the 61st anonymous read in a minute is refused (NO [LIMIT]), and the API refuses the IP too', async () => {
  const own = await startService();
  try {
    await own.send({ to: 'count@ephemail.test', subject: 'c', text: 'x' });
    const c = open(own.imapPort);
    await c.until(/^\* OK/m);
    c.send('l LOGIN count@ephemail.test x\r\ns SELECT INBOX\r\n'); // requests 1 and 2
    await c.until(/^s OK/m);
    for (let i = 3; i <= 60; i++) c.send(`f${i} FETCH 1 (FLAGS)\r\n`);
    await c.until(/^f60 /m);
    assert.doesNotMatch(c.all, /NO \[LIMIT\]/);
    c.send('f61 FETCH 1 (FLAGS)\r\n');
    assert.match(await c.until(/^f61 /m), /^f61 NO \[LIMIT\] More than 60 requests this minute; retry in \d+ s/m);
    const api = await own.api('/api/v1/inboxes/count@ephemail.test/emails');
    assert.equal(api.status, 429);
    c.s.destroy();
  } finally {
    await own.stop();
  }
});

test('connections per client are capped like SMTP (25): the 26th gets BYE', async () => {
  const conns = Array.from({ length: 25 }, () => open(svc.imapPort));
  await Promise.all(conns.map((c) => c.until(/^\* OK/m)));
  const extra = open(svc.imapPort);
  assert.match(await extra.until(/^\* BYE/m), /Too many connections/);
  await until(() => extra.closed, 'the 26th is closed');
  const pop = open(svc.pop3Port); // POP3 has caps of its own
  assert.match(await pop.until(/^\+OK/m), /POP3/);
  for (const c of [...conns, pop]) c.s.destroy();
  // released when they close
  await until(async () => {
    const again = open(svc.imapPort);
    const ok = /^\* OK/m.test(await again.until(/^\* (OK|BYE)/m));
    again.s.destroy();
    return ok;
  }, 'a slot frees');
});

test('IDLE holds a wait (ephemail_waits_held); a key holds at most its concurrent waits', async () => {
  const key = ((await (await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { data: { api_key: string } }).data.api_key;
  const sessions = Array.from({ length: 6 }, () => open(svc.imapPort));
  for (const [i, c] of sessions.entries()) {
    await c.until(/^\* OK/m);
    c.send(`l LOGIN limits@ephemail.test ${key}\r\ns SELECT INBOX\r\ni${i} IDLE\r\n`);
    await c.until(/^\+ idling/m);
  }
  await until(() => svc.service.core.waits.held === 5, 'five IDLEs held');
  // the sixth is told, and goes on idling without a wait
  await until(() => sessions.some((c) => /^\* NO \[LIMIT\]/m.test(c.all)), 'the sixth refused a wait');
  for (const [i, c] of sessions.entries()) {
    c.send('DONE\r\n');
    await c.until(new RegExp(`^i${i} OK IDLE terminated`, 'm'));
    c.s.destroy();
  }
  await until(() => svc.service.core.waits.held === 0, 'waits released');
});

test('autologout after the idle time (set short here): * BYE and closed', async () => {
  const server = createImapServer(svc.service.core, createMemoryUids(), null, { idleMs: 150 });
  const addr = await server.listen(0, '127.0.0.1');
  try {
    const c = open(addr.port);
    await c.until(/^\* OK/m);
    assert.match(await c.until(/^\* BYE Autologout/m), /BYE/);
    await until(() => c.closed, 'closed');
  } finally {
    await server.close();
  }
});

test('floods: a 1 MB line, a 4 GB literal, 10,000 nested parentheses, 1,000 pipelined commands; tagged answers, /livez fast', async () => {
  const c = open(svc.imapPort);
  await c.until(/^\* OK/m);
  c.send(`a1 NOOP ${'x'.repeat(1024 * 1024)}\r\n`);
  assert.match(await c.until(/^a1 /m), /^a1 BAD Command line longer than 8192 bytes/m);
  c.send('a2 LOGIN {4294967296}\r\n');
  assert.match(await c.until(/^a2 /m), /^a2 BAD Literal of 4294967296 bytes is over the limit/m);
  c.send(`a3 NOOP ${'('.repeat(10_000)}\r\n`);
  assert.match(await c.until(/^a3 /m), /^a3 BAD/m);
  c.send(`a4 NOOP ${'('.repeat(100)}\r\n`);
  assert.match(await c.until(/^a4 /m), /^a4 BAD Lists nested deeper than/m);
  await livezMs(); // (the first request opens the connection)
  const t0 = performance.now();
  c.send(Array.from({ length: 1000 }, (_, i) => `p${i} NOOP\r\n`).join(''));
  const samples: number[] = [];
  while (!/^p999 /m.test(c.all)) samples.push(await livezMs());
  await c.until(/^p999 OK/m);
  assert.equal((c.all.match(/^p\d+ OK NOOP completed/gm) ?? []).length, 1000);
  samples.sort((x, y) => x - y);
  // bound: the issue's, /livez under 50 ms while a session floods (the median of the samples taken
  // meanwhile: one sample can be stretched by other processes on the test machine's two cores)
  assert.ok(samples[Math.floor(samples.length / 2)] < 50, `/livez took ${samples.join(', ')} ms`);
  assert.ok(performance.now() - t0 < 10_000); // bound: 1,000 NOOPs answered well within 10 s
  assert.equal(c.closed, false, 'the session goes on');
  // a non-synchronizing literal over the cap cannot be skipped: closed
  c.send('a5 LOGIN {4294967296+}\r\n');
  await c.until(/^a5 BAD/m);
  await until(() => c.closed, 'closed after a literal it cannot skip');

  const g = open(svc.imapPort);
  await g.until(/^\* OK/m);
  for (let i = 0; i < 25; i++) g.send(`g${i} \x01\x02garbage\r\n`);
  assert.match(await g.until(/^\* BYE Too many bad commands/m), /BYE/);
  await until(() => g.closed, 'closed after garbage');

  const p = open(svc.pop3Port);
  await p.until(/^\+OK/m);
  p.send(`${'y'.repeat(1024 * 1024)}\r\nNOOP\r\n`);
  assert.match(await p.until(/^\+OK\r\n/m), /^-ERR Line longer than 8192 bytes\r\n\+OK\r\n/m);
  p.s.destroy();
});

/** The server's responses as logical lines: a literal (`{n}` at a line's end) and what follows it belong to its line. */
function responses(buf: Buffer): string[] {
  const out: string[] = [];
  let i = 0;
  let cur = '';
  while (i < buf.length) {
    const lf = buf.indexOf('\r\n', i);
    if (lf < 0) break;
    const line = buf.subarray(i, lf).toString('latin1');
    i = lf + 2;
    const lit = /\{(\d+)\}$/.exec(line);
    if (lit) {
      cur += line;
      i += Number(lit[1]);
      continue;
    }
    out.push(cur + line);
    cur = '';
  }
  return out;
}

const REAL = [
  'a1 CAPABILITY', 'a2 LOGIN "limits@ephemail.test" "x"', 'a3 SELECT INBOX', 'a4 UID FETCH 1:* (UID FLAGS RFC822.SIZE ENVELOPE BODYSTRUCTURE)',
  'a5 FETCH 1 (BODY.PEEK[HEADER.FIELDS (FROM SUBJECT)]<0.10>)', 'a6 SEARCH OR SUBJECT "one" FROM "x" SINCE 1-Jan-2026', 'a7 STORE 1 +FLAGS (\\Seen)',
  'a8 LIST "" "*"', 'a9 STATUS INBOX (MESSAGES UIDNEXT)', 'b1 FETCH 1 BODY[1.2.MIME]', 'b2 UID SEARCH UID 1:*', 'b3 NOOP', 'b4 EXAMINE INBOX', 'b5 ID NIL',
];

test('fuzz over a socket: random and mutated commands are always answered, the process stays up, /livez under 50 ms', async () => {
  const lineOk = /^(\* |\+ |[\x21-\x7e]+ (OK|NO|BAD)( |$))/;
  const mutated = fc.tuple(fc.constantFrom(...REAL), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.constantFrom('', '{4294967296}', '{7}', '((((', '"', ']'))
    .map(([cmd, edits, tail]) => {
      const b = Buffer.from(cmd + tail + '\r\n');
      for (const [at, byte] of edits) b[at % b.length] = byte;
      return b;
    });
  const random = fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a));
  const fuzzed = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' });
  await fuzzed.send({ to: 'limits@ephemail.test', subject: 'one', text: 'x' });
  await livezMs(fuzzed); // (the first request opens the connection)
  const lives: number[] = [];
  try {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(mutated, mutated, random), { minLength: 1, maxLength: 6 }), async (parts) => {
        const c = open(fuzzed.imapPort);
        await c.until(/^\* OK/m);
        c.send(Buffer.concat([Buffer.from('z0 LOGIN limits@ephemail.test x\r\nz1 SELECT INBOX\r\n'), ...parts, Buffer.from('\r\nzz LOGOUT\r\n')]));
        // answered to the end (LOGOUT), or quiet: a literal it announced is still being read, or the
        // closing LOGOUT was part of a bad line (then nothing more is owed)
        await c.until(/^zz OK LOGOUT/m, 150).catch(() => undefined);
        for (let seen = -1; seen !== c.all.length && !c.closed;) {
          seen = c.all.length;
          await new Promise((r) => setTimeout(r, 100)); // quiet window: no more answers are coming
        }
        lives.push(await livezMs(fuzzed));
        const lines = responses(Buffer.from(c.all, 'latin1'));
        for (const l of lines) assert.match(l, lineOk, 'every answer is untagged (*), a continuation (+) or tagged');
        assert.ok(lines.length > 0 && /^\* OK/.test(lines[0]));
        assert.ok(lines.some((l) => /^z1 OK/.test(l)), 'the session was set up');
        c.s.destroy();
      }),
      { numRuns: 100 },
    );
    lives.sort((x, y) => x - y);
    // bound: the issue's, /livez under 50 ms during the fuzz: 9 in 10 (a few can be stretched by
    // other processes on the test machine's two cores)
    assert.ok(lives[Math.floor(lives.length * 0.9)] < 50, `/livez took ${lives.slice(-10).join(', ')} ms at worst`);
    assert.equal((await fuzzed.api('/api/v1/health')).status, 200);
  } finally {
    await fuzzed.stop();
  }
});

test('behind a PROXY-protocol balancer (EPHEMAIL_SMTP_PROXY_PROTOCOL) sessions count by the client the header names', async () => {
  const own = await startService({ EPHEMAIL_SMTP_PROXY_PROTOCOL: '127.0.0.1' });
  try {
    const via = (client: string) => {
      const c = open(own.imapPort);
      c.send(`PROXY TCP4 ${client} 127.0.0.1 40000 143\r\n`);
      return c;
    };
    const first = Array.from({ length: 25 }, () => via('203.0.113.7'));
    await Promise.all(first.map((c) => c.until(/^\* OK/m)));
    const over = via('203.0.113.7');
    assert.match(await over.until(/^\* BYE/m), /Too many connections from your address/);
    const other = via('198.51.100.9');
    assert.match(await other.until(/^\* (OK|BYE)/m), /^\* OK/m);
    const pop = open(own.pop3Port);
    pop.send('PROXY TCP4 203.0.113.7 127.0.0.1 40000 110\r\n');
    assert.match(await pop.until(/^[+-]/m), /^\+OK/);
    for (const c of [...first, over, other, pop]) c.s.destroy();
  } finally {
    await own.stop();
  }
});

test('POP3 fuzz: random and mutated lines each get one +OK or -ERR, and the session goes on', async () => {
  const fuzzed = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' });
  await fuzzed.send({ to: 'pop@ephemail.test', subject: 'one', text: 'x' });
  const real = ['USER pop@ephemail.test', 'PASS x', 'STAT', 'LIST', 'LIST 1', 'UIDL', 'RETR 1', 'TOP 1 0', 'DELE 1', 'RSET', 'NOOP', 'CAPA', 'AUTH PLAIN', 'STLS', 'LIST 99', 'TOP 1'];
  const line = fc.oneof(
    fc.tuple(fc.constantFrom(...real), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 32, max: 126 })), { maxLength: 3 })).map(([l, edits]) => {
      const b = Buffer.from(l);
      for (const [at, byte] of edits) b[at % b.length] = byte;
      return b.toString('latin1');
    }),
    fc.string({ maxLength: 60 }).map((s) => s.replace(/[\r\n]/g, ' ')),
  );
  try {
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 8 }), async (lines) => {
        const c = open(fuzzed.pop3Port);
        await c.until(/^\+OK/m);
        // no AUTH continuation is left open: a lone `AUTH PLAIN` is answered with `+ ` and waits for one line
        const sent = ['USER pop@ephemail.test', 'PASS x', ...lines.filter((l) => !/^auth plain\s*$/i.test(l.trim())), 'NOOP', 'QUIT'];
        c.send(sent.join('\r\n') + '\r\n');
        await c.until(/^\+OK ephemail POP3 signing off/m, 3000);
        // one status reply (+OK or -ERR) per line sent, after the greeting; none is left unanswered
        const replies = c.all.split('\r\n').filter((l) => /^(\+OK|-ERR)/.test(l));
        assert.equal(replies.length, 1 + sent.length, c.all.slice(0, 400));
        c.s.destroy();
      }),
      { numRuns: 60 },
    );
  } finally {
    await fuzzed.stop();
  }
});

test('what a client sent never starts a response line of its own (a literal holding CR LF echoed in a BAD)', async () => {
  const c = open(svc.imapPort);
  await c.until(/^\* OK/m);
  c.send('a1 LOGIN limits@ephemail.test x\r\na2 SELECT INBOX\r\na3 SEARCH {11}\r\n');
  await c.until(/^\+ Ready/m);
  c.send('x\r\n* 9 BYE\r\n');
  const out = await c.until(/^a3 /m);
  assert.match(out, /^a3 BAD Unknown SEARCH key X\?\?\* 9 BYE\?$/m);
  assert.doesNotMatch(out, /^\* 9 BYE/m);
  c.s.destroy();
});
