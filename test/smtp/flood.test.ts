// The flood (issue 34): a DATA far over the size limit stops being read soon after it passes the
// limit: the client gets `552 5.3.4` and the connection is closed, so a 256 MiB message, sent as a
// stream of lines or as one line without a newline, costs the process little memory. A real
// `ephemail serve` process (its RSS read from /proc) and a real socket; the 256 MiB come from a
// generator, never held here.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { procStatusBytes, spawnServe, type Served } from '../helpers/serve.ts';
import { startService } from '../helpers/service.ts';
import { SmtpClient } from '../helpers/smtp.ts';

const LIMIT = 200_000; // EPHEMAIL_MAX_MESSAGE_BYTES, as in the measurement
const FLOOD = 256 * 1024 * 1024;
const MiB = 1024 * 1024;

let served: Served;
before(async () => {
  served = await spawnServe({ EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_MAX_MESSAGE_BYTES: String(LIMIT), EPHEMAIL_LOG_LEVEL: 'warn' }, { ready: 'health', name: 'flood' });
});
after(() => {
  served.child.kill('SIGKILL');
});

const pid = () => served.child.pid!;
const status = (field: 'VmRSS' | 'VmHWM') => procStatusBytes(pid(), field);

/** Peak RSS from now on: the kernel's high-water mark reset (clear_refs 5), and samples as a fallback. */
function watchRss(): () => number {
  let resetHwm = true;
  try {
    writeFileSync(`/proc/${pid()}/clear_refs`, '5');
  } catch {
    resetHwm = false; // then the mark still holds the start-up peak: the samples decide
  }
  let peak = status('VmRSS');
  const timer = setInterval(() => (peak = Math.max(peak, status('VmRSS'))), 5);
  timer.unref();
  return () => {
    clearInterval(timer);
    return Math.max(peak, status('VmRSS'), resetHwm ? status('VmHWM') : 0);
  };
}

/** 64 KiB pieces of the flood: CRLF-ended lines of 78 bytes, or one line with no newline at all. */
function* flood(shape: 'lines' | 'one line'): Generator<Buffer> {
  const piece = Buffer.alloc(64 * 1024, 'x');
  if (shape === 'lines') for (let i = 76; i < piece.length; i += 78) piece.write('\r\n', i, 'latin1');
  for (let sent = 0; sent < FLOOD; sent += piece.length) yield piece;
}

interface Outcome {
  reply: string;
  written: number;
  closed: boolean;
  ms: number;
}

/** One SMTP session that sends the flood as its DATA (with the terminator if it gets that far). */
async function send(shape: 'lines' | 'one line'): Promise<Outcome> {
  const socket: Socket = connect({ port: served.smtpPort, host: '127.0.0.1' });
  socket.on('error', () => undefined); // a reset while writing: the outcome says what was read
  let text = '';
  let closed = false;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    text += d;
    wake();
  });
  socket.on('close', () => {
    closed = true;
    wake();
  });
  const lines = () => text.split('\r\n').filter((l) => /^\d{3} /.test(l));
  const reply = async (n: number, ms = 30_000) => {
    const t0 = performance.now();
    while (lines().length < n && !closed) {
      if (performance.now() - t0 > ms) throw new Error(`no reply ${n} within ${ms} ms: ${text}`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 100); // poll: a reply or the close wakes it sooner (waiters)
      });
    }
    return lines()[n - 1] ?? '';
  };
  await reply(1);
  socket.write('EHLO flood.example\r\nMAIL FROM:<a@flood.example>\r\nRCPT TO:<big@ephemail.test>\r\nDATA\r\n');
  assert.match(await reply(5), /^354 /, text); // after the greeting and the replies to EHLO, MAIL and RCPT
  const t0 = performance.now();
  let written = 0;
  for (const piece of flood(shape)) {
    if (closed || lines().length > 5 || socket.destroyed) break;
    written += piece.length;
    if (!socket.write(piece)) {
      await new Promise<void>((r) => {
        const done = () => {
          socket.off('drain', done);
          socket.off('close', done);
          clearInterval(poll);
          r();
        };
        socket.on('drain', done);
        socket.on('close', done);
        // a server that stopped reading never drains: look at its replies meanwhile
        const poll = setInterval(() => (lines().length > 5 || closed) && done(), 20);
      });
    }
  }
  if (!closed && lines().length <= 5 && !socket.destroyed) socket.write('\r\n.\r\n');
  const final = await reply(6, 60_000);
  const ms = performance.now() - t0;
  // the server closes the connection after its 552 (a client that keeps writing is not waited for)
  const t1 = performance.now();
  while (!closed && performance.now() - t1 < 10_000) await new Promise((r) => setTimeout(r, 20)); // poll: until the server closed the connection
  socket.destroy();
  return { reply: final, written, closed, ms };
}

for (const shape of ['lines', 'one line'] as const) {
  test(`a refused 256 MiB DATA as ${shape}: 552 5.3.4 soon after the limit, the connection closed, RSS grows < 32 MiB`, { timeout: 120_000 }, async (t) => {
    await new Promise((r) => setTimeout(r, 300)); // unobservable: the process settles after the previous session (freed buffers)
    const before = status('VmRSS');
    let grew = 0;
    const peak = watchRss();
    const out = await send(shape).finally(() => (grew = peak() - before));
    const seen = `reply ${JSON.stringify(out.reply)} after ${Math.round(out.ms)} ms; ${(out.written / MiB).toFixed(1)} MiB written; RSS +${(grew / MiB).toFixed(1)} MiB`;
    t.diagnostic(seen);
    assert.match(out.reply, /^552 5\.3\.4 /, seen);
    assert.equal(out.closed, true, `the server closed the connection after its 552: ${seen}`);
    // "stops being read soon after the limit": what the client got written is the limit plus what
    // the sockets' buffers on both sides take (a few MiB on loopback), far from the 256 MiB
    assert.ok(out.written < 64 * MiB, `the client wrote ${(out.written / MiB).toFixed(1)} MiB before the server stopped reading`);
    assert.ok(grew < 32 * MiB, `RSS grew by ${(grew / MiB).toFixed(1)} MiB (from ${(before / MiB).toFixed(0)} MiB)`);
    // the service goes on: a normal message from a new session is taken
    const health = await fetch(`${served.http}/api/v1/health`);
    assert.equal(health.status, 200);
  });
}

test('after STARTTLS too: a flood gets 552 and the TLS connection is closed, the rest not read', { timeout: 120_000 }, async () => {
  const svc = await startService({ EPHEMAIL_SMTP_TLS: 'self-signed', EPHEMAIL_MAX_MESSAGE_BYTES: String(LIMIT) }, { mounts: [] });
  try {
    const { client: plain } = await SmtpClient.open(svc.smtpPort);
    await plain.cmd('EHLO flood.example');
    const { client, tls } = await plain.startTls();
    assert.equal((await client.cmd('EHLO flood.example')).code, 250);
    assert.equal((await client.cmd('MAIL FROM:<a@flood.example>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<big-tls@ephemail.test>')).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    const answer = client.read(60_000);
    let replied = false;
    void answer.then(() => (replied = true));
    let written = 0;
    for (const piece of flood('lines')) {
      if (replied || tls.destroyed) break;
      written += piece.length;
      if (!tls.write(piece)) {
        await new Promise<void>((r) => {
          const poll = setInterval(() => (replied || tls.destroyed) && done(), 20);
          const done = () => {
            clearInterval(poll);
            tls.off('drain', done);
            r();
          };
          tls.on('drain', done);
        });
      }
    }
    const r = await answer;
    assert.equal(r.code, 552, r.text);
    assert.match(r.text, /^5\.3\.4 .*closing connection/);
    assert.equal((await client.read(10_000)).code, 0, 'the connection is closed');
    assert.ok(written < 64 * MiB, `the client wrote ${(written / MiB).toFixed(1)} MiB before the server stopped reading`);
    assert.equal(((await (await svc.api('/api/v1/inboxes/big-tls@ephemail.test/emails')).json()) as { data: unknown[] }).data.length, 0);
  } finally {
    await svc.stop();
  }
});
