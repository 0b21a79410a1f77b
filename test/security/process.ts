// The real `ephemail serve` process for fault tests: spawned with its own SQLite file, its JSON log
// lines collected, killed or stopped by signal.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const BIN = resolve(import.meta.dirname, '../../bin/ephemail.js');

export interface ServiceProcess {
  proc: ChildProcess;
  http: string;
  smtpPort: number;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or the signal name) once the process is gone. */
  exited: Promise<number | string>;
}

export async function spawnService(env: Record<string, string>, timeoutMs = 30_000): Promise<ServiceProcess> {
  const proc = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | string>((done) => proc.once('exit', (code, signal) => done(code ?? signal ?? -1)));
  const started = new Promise<{ http: string; smtp: string }>((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`service did not start within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString('utf8');
      for (const line of out.split('\n')) {
        if (!line.includes('ephemail started')) continue;
        try {
          const j = JSON.parse(line);
          clearTimeout(t);
          ok({ http: j.http, smtp: j.smtp });
        } catch {
          /* partial line */
        }
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
    void exited.then((c) => fail(new Error(`service exited (${c}) before it started:\n${out}`)));
  });
  const { http, smtp } = await started;
  return { proc, http, smtpPort: Number(smtp.split(':').pop()), output: () => out, exited };
}
