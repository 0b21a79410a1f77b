// Real mail, side by side, in one run: each message is
// sent with Postfix's `smtp-source -d -s 20 -F <file>` to Postfix's `smtp-sink` (accepts everything,
// stores nothing: the protocol ceiling), to ephemail (a 250 means committed to SQLite with
// synchronous=FULL) and to maildev 3.0.0 (bench/maildev, installed on demand), runs interleaved, and
// ephemail is printed as a ratio to both. Messages: the realistic 5 KB multipart/alternative message,
// plain 5 KB text, a ~50 KB HTML newsletter with a text part, and 1 MB with a PDF attachment.
//
//   node --import tsx bench/realmail.ts [--runs=3] [--quick] [--base=<checkout>] [realistic text newsletter attachment]
//
// With --base, another checkout's build (its bin/ephemail.js; `git worktree add /tmp/base <commit> &&
// (cd /tmp/base && npm ci)`) runs interleaved with this one (the order alternates by run), and each
// build's CPU per message is printed too: the service process's user + system time from the start of
// a run until it is idle again (so work left for after the 250, such as the verdicts, is counted).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsOf, cpuMsSettled, fmt, freePort, machineLine, parseArgs, ROOT, sleep, spread, waitPort, startService, type ServiceProcess, type Spread } from './lib.ts';
import { realisticMessage } from './messages.ts';
import { attachmentMessage, htmlMessage, textMessage } from './smtp-load.ts';
import { openSink, SMTP_SINK, SMTP_SOURCE } from './smtp.ts';

const MAILDEV_DIR = join(ROOT, 'bench', 'maildev');
const MAILDEV_BIN = join(MAILDEV_DIR, 'node_modules', 'maildev', 'dist', 'bin', 'maildev.js');
const SESSIONS = 20;

interface Case { key: string; name: string; file: string; messages: number; bytes: number }

/** Writes the messages as files (CRLF lines, not dot-stuffed: smtp-source -F does that). */
function messageFiles(quick: boolean): Case[] {
  const dir = join(ROOT, 'node_modules', '.cache', 'ephemail-bench');
  mkdirSync(dir, { recursive: true });
  const unwire = (wire: Buffer) => wire.toString('latin1').replace(/\r\n\.\r\n$/, '\r\n').replace(/^\.\./gm, '.');
  const list: [string, string, string, number][] = [
    ['realistic', '5 KB multipart/alternative (realistic)', realisticMessage().toString('latin1'), 15_000],
    ['text', '5 KB plain text', unwire(textMessage(5).wire), 15_000],
    ['newsletter', '50 KB HTML newsletter', unwire(htmlMessage(50).wire), 2_000],
    ['attachment', '1 MB with a PDF attachment', unwire(attachmentMessage(1024).wire), 200],
  ];
  return list.map(([key, name, content, messages]) => {
    const file = join(dir, `${key}.eml`);
    // smtp-source appends CRLF after each line: the file has plain LF line ends
    writeFileSync(file, content.replace(/\r\n/g, '\n'), 'latin1');
    return { key, name, file, messages: quick ? Math.max(20, Math.round(messages / 200)) : messages, bytes: Buffer.byteLength(content, 'latin1') };
  });
}


/** smtp-source against one port: messages per second, or null when it failed. */
function source(port: number, c: Case): number | null {
  const t0 = performance.now();
  const r = spawnSync(SMTP_SOURCE!, ['-d', '-s', String(SESSIONS), '-m', String(c.messages), '-F', c.file, '-f', 'sender@bench.example', '-t', 'user@ephemail.test', '-N', `127.0.0.1:${port}`], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 600_000 });
  const ms = performance.now() - t0;
  if (r.status !== 0) {
    console.log(`    smtp-source to ${port} failed: ${r.stderr?.toString().slice(0, 300)}`);
    return null;
  }
  return (c.messages / ms) * 1000;
}

/** maildev 3.0.0 from the bench-only manifest; installed once with `npm ci --prefix bench/maildev`. */
function ensureMaildev(): boolean {
  if (existsSync(MAILDEV_BIN)) return true;
  console.log('  installing maildev 3.0.0 into bench/maildev (bench-only manifest)…');
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', MAILDEV_DIR], { stdio: 'inherit', timeout: 600_000 });
  return r.status === 0 && existsSync(MAILDEV_BIN);
}

async function startMaildev(): Promise<{ smtp: number; web: number; proc: ChildProcess }> {
  const smtp = await freePort();
  const web = await freePort();
  const proc = spawn(process.execPath, [MAILDEV_BIN, '--smtp', String(smtp), '--web', String(web), '--ip', '127.0.0.1', '--web-ip', '127.0.0.1', '--silent'], { stdio: 'ignore' });
  await waitPort(smtp);
  await waitPort(web);
  return { smtp, web, proc };
}

/** How many messages maildev holds (its REST API): it must have stored what it acknowledged. */
async function maildevCount(web: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${web}/email`);
  return ((await res.json()) as unknown[]).length;
}

export interface RealMailResult {
  key: string;
  name: string;
  ephemail: Spread;
  sink: Spread | null;
  maildev: Spread | null;
  /** With a base build: its rate, and both builds' CPU ms per message. */
  base?: Spread;
  cpuPerMsg?: { ephemail: Spread; base: Spread };
}

/** One smtp-source run against a service: msgs/s and the service's CPU ms per message (until idle). */
async function measured(svc: ServiceProcess, c: Case): Promise<{ rate: number; cpu: number } | null> {
  const before = cpuMsOf(svc.pid);
  const rate = source(svc.smtpPort, c);
  if (rate === null) return null;
  return { rate, cpu: ((await cpuMsSettled(svc.pid)) - before) / c.messages };
}

export async function benchRealMail(opts: { runs: number; quick: boolean; only: string[]; base?: string }, log: (s: string) => void = console.log): Promise<RealMailResult[]> {
  if (!SMTP_SOURCE || !SMTP_SINK) {
    log('  smtp-source/smtp-sink not installed (Debian package postfix, see bench/README.md): skipped');
    return [];
  }
  const withMaildev = ensureMaildev();
  if (!withMaildev) log('  maildev could not be installed: its column is missing');
  const results: RealMailResult[] = [];
  for (const c of messageFiles(opts.quick).filter((x) => opts.only.length === 0 || opts.only.includes(x.key))) {
    const sink = (await openSink())!;
    const svc = await startService(); // BENCH_ENV: limits raised, log at warn
    const baseSvc = opts.base ? await startService({}, { script: join(opts.base, 'bin', 'ephemail.js') }) : null;
    const md = withMaildev ? await startMaildev() : null;
    try {
      // warm-up: JIT, worker threads, SQLite page cache
      source(svc.smtpPort, { ...c, messages: Math.min(c.messages, 300) });
      if (baseSvc) source(baseSvc.smtpPort, { ...c, messages: Math.min(c.messages, 300) });
      if (md) source(md.smtp, { ...c, messages: Math.min(c.messages, 50) });
      await cpuMsSettled(svc.pid);
      if (baseSvc) await cpuMsSettled(baseSvc.pid);
      const e: number[] = [];
      const s: number[] = [];
      const m: number[] = [];
      const bse: number[] = [];
      const cpuE: number[] = [];
      const cpuB: number[] = [];
      for (let i = 0; i < opts.runs; i++) {
        const a = source(sink.port, c);
        if (a) s.push(a);
        // this and base alternate which goes first
        for (const which of i % 2 === 0 ? ['this', 'base'] : ['base', 'this']) {
          const target = which === 'this' ? svc : baseSvc;
          if (!target) continue;
          const r = await measured(target, c);
          if (r) (which === 'this' ? e : bse).push(r.rate);
          if (r) (which === 'this' ? cpuE : cpuB).push(r.cpu);
        }
        const d = md ? source(md.smtp, c) : null;
        if (d) m.push(d);
      }
      if (md) {
        const held = await maildevCount(md.web);
        const sent = Math.min(c.messages, 50) + c.messages * m.length;
        if (held < sent) log(`    maildev holds ${held} of ${sent} messages it acknowledged`);
      }
      const r: RealMailResult = { key: c.key, name: c.name, ephemail: spread(e), sink: s.length ? spread(s) : null, maildev: m.length ? spread(m) : null };
      if (bse.length && cpuB.length) {
        r.base = spread(bse);
        r.cpuPerMsg = { ephemail: spread(cpuE), base: spread(cpuB) };
      }
      results.push(r);
      const pct = (x: Spread | null) => (x ? `${((r.ephemail.median / x.median) * 100).toFixed(0)}%` : 'n/a');
      const times = (x: Spread | null) => (x ? `${(r.ephemail.median / x.median).toFixed(1)}×` : 'n/a');
      log(`  ${c.name.padEnd(40)} ephemail ${fmt(r.ephemail)} msgs/s | smtp-sink ${r.sink ? fmt(r.sink) : 'n/a'} → ${pct(r.sink)} of sink | maildev ${r.maildev ? fmt(r.maildev) : 'n/a'} → ${times(r.maildev)} maildev`);
      if (r.base && r.cpuPerMsg) {
        const cpu = r.cpuPerMsg;
        log(`  ${''.padEnd(40)} base ${fmt(r.base)} msgs/s → this/base ${(r.ephemail.median / r.base.median).toFixed(2)} | CPU ms/msg this ${cpu.ephemail.median.toFixed(3)} base ${cpu.base.median.toFixed(3)} → this/base ${(cpu.ephemail.median / cpu.base.median).toFixed(2)}`);
      }
    } finally {
      await baseSvc?.stop();
      sink.stop();
      md?.proc.kill('SIGTERM');
      await svc.stop();
    }
  }
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# Real mail with smtp-source -d -s ${SESSIONS}: ephemail vs smtp-sink vs maildev 3.0.0, ${opts.runs} interleaved run(s), median (min–max) — ${new Date().toISOString()} — ${machineLine()}`);
  const baseArg = process.argv.find((a) => a.startsWith('--base='));
  await benchRealMail({ runs: opts.runs, quick: opts.quick, only: opts.only, base: baseArg ? baseArg.slice(7) : undefined });
}
