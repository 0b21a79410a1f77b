// A real SpamAssassin spamd for tests (Debian's `spamassassin` package): started on a free loopback
// port, local tests only (-L: no DNS blocklists, no network), no Bayes, no user configs; stopped by
// its own pid. Start-up takes seconds (it compiles its rules): start() waits for its "server started"
// line, not a fixed time.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SPAMD_BIN = process.env.EPHEMAIL_SPAMD_BIN || ['/usr/sbin/spamd', '/usr/bin/spamd'].find((p) => existsSync(p)) || '';
/** Why spamd tests cannot run here, or ''. */
export const spamdMissing = SPAMD_BIN ? '' : 'no spamd (/usr/sbin/spamd): apt-get install -y spamassassin (Debian), or EPHEMAIL_SPAMD_BIN=<path>';

/** A loopback port free at the time of asking. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok) => srv.listen(0, '127.0.0.1', ok));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((ok) => srv.close(() => ok()));
  return port;
}

export interface Spamd {
  port: number;
  stop(): Promise<void>;
}

export async function startSpamd(timeoutMs = 120_000): Promise<Spamd> {
  const port = await freePort();
  const home = mkdtempSync(join(tmpdir(), 'ephemail-spamd-'));
  const args = [
    '--local', // no network tests (DNS blocklists, URIBL, Razor, Pyzor)
    '--nouser-config',
    '--syslog=stderr',
    `--listen=127.0.0.1:${port}`,
    '--allowed-ips=127.0.0.1',
    '--max-children=2',
    '--min-children=1',
    '--max-spare=1',
    '--cf=use_bayes 0',
    '--cf=bayes_auto_learn 0',
    '--cf=dns_available no',
    `--helper-home-dir=${home}`,
    `--pidfile=${join(home, 'spamd.pid')}`,
  ];
  if (process.getuid?.() === 0) args.push('--username=nobody'); // spamd refuses to run its children as root
  const child: ChildProcess = spawn(SPAMD_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`spamd did not start within ${timeoutMs} ms:\n${log.slice(-4000)}`)), timeoutMs);
    child.stderr!.on('data', (d: Buffer) => {
      log += d.toString('utf8');
      if (log.length > 200_000) log = log.slice(-100_000);
      // the parent logs this once a child is ready to take connections
      if (/server successfully spawned child process/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`spamd exited with ${code} before it started:\n${log.slice(-4000)}`));
    });
  });
  child.stderr!.resume();
  return {
    port,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((ok) => child.once('exit', ok));
        child.kill('SIGTERM'); // the parent ends its children
        await exited;
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}
