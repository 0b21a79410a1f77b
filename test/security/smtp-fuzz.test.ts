// Mutation fuzzing of the SMTP dialogue, smtp-server style: seeded random
// mutations of the lines of a valid session; every line sent gets exactly one reply, and an RSET
// after each input still answers 250. Seed and size: EPHEMAIL_FUZZ_SEED, EPHEMAIL_FUZZ_INPUTS.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, type Reply } from '../helpers/smtp.ts';

const SEED = Number(process.env.EPHEMAIL_FUZZ_SEED ?? 20261122);
const INPUTS = Number(process.env.EPHEMAIL_FUZZ_INPUTS ?? 400);

/** mulberry32: a small seeded PRNG, so a failing input can be replayed from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)] };
}

const VALID = [
  'EHLO fuzz.example',
  'HELO fuzz.example',
  'MAIL FROM:<sender@example.org>',
  'MAIL FROM:<sender@example.org> SIZE=1000 BODY=8BITMIME',
  'MAIL FROM:<>',
  'RCPT TO:<fuzz@ephemail.test>',
  'RCPT TO:<Fuzz.Two+tag@EPHEMAIL.TEST>',
  'RCPT TO:<someone@elsewhere.example>',
  'NOOP',
  'RSET',
  'VRFY fuzz@ephemail.test',
  'HELP',
  'DATA',
  'BDAT 10 LAST',
] as const;
const NASTY = ['\r', '\u0000', '\t', ' ', '<', '>', ':', '"', '\\', '@', '%', '=', '\u00ff', '\u202e', '.', '\x1b[2J', '\r\n', '\n'];

/** One to three random edits of a valid line: byte flips, inserts, deletes, duplication, case, floods. */
function mutate(line: string, r: ReturnType<typeof prng>): string {
  let s = line;
  const ops = 1 + r.int(3);
  for (let i = 0; i < ops; i++) {
    const at = r.int(s.length + 1);
    switch (r.int(8)) {
      case 0: s = s.slice(0, at) + String.fromCharCode(r.int(256)) + s.slice(at + 1); break;
      case 1: s = s.slice(0, at) + r.pick(NASTY) + s.slice(at); break;
      case 2: s = s.slice(0, at) + s.slice(at + 1 + r.int(8)); break;
      case 3: s = s.slice(0, at) + s.slice(r.int(s.length), at) + s.slice(at); break;
      case 4: s = r.int(2) ? s.toLowerCase() : s.toUpperCase(); break;
      case 5: s = s.slice(0, at) + r.pick(NASTY).repeat(1 + r.int(2000)) + s.slice(at); break;
      case 6: s = s.slice(0, at); break;
      default: s = `${s} ${r.pick(VALID)}`; break;
    }
  }
  return s;
}

let svc: TestService;
before(async () => {
  svc = await startService({}, { mounts: [] });
});
after(async () => svc.stop());

test(`SMTP mutation fuzzing: ${INPUTS} inputs, seed ${SEED}`, { timeout: 240_000 }, async (t) => {
  const r = prng(SEED);
  let conn: SmtpClient | null = null;
  const connect = async () => {
    conn?.socket.destroy();
    const { client, greeting } = await SmtpClient.open(svc.smtpPort);
    assert.equal(greeting.code, 220);
    conn = client;
    return client;
  };
  const read = async (c: SmtpClient, what: string): Promise<Reply> => {
    try {
      return await c.read(10_000);
    } catch {
      throw new Error(`no reply within 10 s to ${what}`);
    }
  };
  let reconnects = 0;
  const codes = new Map<number, number>();
  for (let i = 0; i < INPUTS; i++) {
    let c: SmtpClient = conn ?? (await connect());
    if (r.int(3) === 0) await c.cmd('EHLO fuzz.example'); // some inputs land inside a transaction
    if (r.int(3) === 0) await c.cmd('MAIL FROM:<sender@example.org>');
    const input = mutate(r.pick(VALID), r);
    const label = `input ${i} (seed ${SEED}): ${JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…(${input.length})` : input)}`;
    // smtp-server ends a command line at LF (with or without CR): each such line is one command
    const lines = input.split('\n');
    c.write(`${input}\r\n`);
    let closed = false;
    for (let l = 0; l < lines.length; l++) {
      const reply = await read(c, label);
      codes.set(reply.code, (codes.get(reply.code) ?? 0) + 1);
      assert.ok(reply.code >= 200 && reply.code < 600 || reply.code === 0, `${label}: reply ${reply.code}`);
      if (reply.code === 0 || reply.code === 421 || reply.code === 221) {
        closed = true;
        break;
      }
      if (reply.code === 354) {
        // a mutation that still reads as DATA: what follows is message text; end it and get one reply
        c.write('\r\n.\r\n');
        const end = await read(c, `${label} (end of DATA)`);
        assert.ok(end.code >= 250 && end.code < 600, `${label}: ${end.code} after DATA`);
        break;
      }
    }
    if (closed) {
      reconnects++;
      c = await connect();
    }
    // nothing is left over: the next reply is the one to RSET
    const rset = await read((c.write('RSET\r\n'), c), `RSET after ${label}`);
    assert.equal(rset.code, 250, `RSET after ${label}: ${rset.code} ${rset.text}`);
  }
  (conn as SmtpClient | null)?.socket.destroy();
  t.diagnostic(`reconnects: ${reconnects}; reply codes: ${JSON.stringify(Object.fromEntries([...codes].sort((a, b) => a[0] - b[0])))}`);
  const health = await svc.api('/api/v1/health');
  assert.equal(health.status, 200, 'the service still answers');
});
