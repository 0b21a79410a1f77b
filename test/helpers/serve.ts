// The one way tests start the real `ephemail` process (bin/ephemail.js): ports 0, JSON log lines
// read from stdout line by line (an unread pipe would stall the process), resolved once the
// `ephemail started` line names the bound addresses. Killed with SIGKILL when the test process exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const BIN = resolve(import.meta.dirname, '../../bin/ephemail.js');

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface Served {
  child: ChildProcess;
  http: string;
  smtp: string;
  smtpPort: number;
  /** The `ephemail started` log record. */
  startLine: Record<string, unknown>;
  /** Every JSON log line so far. */
  logs: Record<string, unknown>[];
  /** Everything written to stdout and stderr so far. */
  output(): string;
}

export async function spawnServe(env: Record<string, string>, options: { args?: string[]; timeoutMs?: number; name?: string; inheritEnv?: boolean } = {}): Promise<Served> {
  const name = options.name ?? 'ephemail';
  const timeoutMs = options.timeoutMs ?? 30_000;
  const base = options.inheritEnv === false ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env;
  const child = spawn(process.execPath, [BIN, ...(options.args ?? ['serve'])], {
    cwd: resolve(import.meta.dirname, '../..'),
    env: { ...base, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const logs: Record<string, unknown>[] = [];
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  const started = new Promise<Record<string, unknown>>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name}: no 'ephemail started' within ${timeoutMs} ms\n${out}`)), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      fail(new Error(`${name} exited (${code ?? signal}) before starting\n${out}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      out += `${line}\n`;
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(rec);
      if (rec.msg === 'ephemail started') {
        clearTimeout(timer);
        ok(rec);
      }
    });
  });
  let startLine: Record<string, unknown>;
  try {
    startLine = await started;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const smtp = String(startLine.smtp);
  return { child, http: String(startLine.http), smtp, smtpPort: Number(smtp.split(':').pop()), startLine, logs, output: () => out };
}
