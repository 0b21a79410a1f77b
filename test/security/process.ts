// The real `ephemail serve` process for fault tests: spawned with its own SQLite file, its JSON log
// lines collected, killed or stopped by signal.
import type { ChildProcess } from 'node:child_process';
import { spawnServe } from '../helpers/serve.ts';

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
  const served = await spawnServe(env, { timeoutMs });
  const proc = served.child;
  const exited = new Promise<number | string>((done) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return done(proc.exitCode ?? proc.signalCode ?? -1);
    proc.once('exit', (code, signal) => done(code ?? signal ?? -1));
  });
  return { proc, http: served.http, smtpPort: served.smtpPort, output: served.output, exited };
}
