// A real SpamAssassin spamd for tests (Debian's `spamassassin` package): started on a free loopback
// port, local tests only (-L: no DNS blocklists, no network), no Bayes, no user configs; stopped by
// its own pid. Start-up takes seconds (it compiles its rules): start() waits for its "server started"
// line, not a fixed time.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './serve.ts';

export const SPAMD_BIN = process.env.EPHEMAIL_SPAMD_BIN || ['/usr/sbin/spamd', '/usr/bin/spamd'].find((p) => existsSync(p)) || '';
/** Why spamd tests cannot run here, or ''. */
export const spamdMissing = SPAMD_BIN ? '' : 'no spamd (/usr/sbin/spamd): apt-get install -y spamassassin spamd (Debian), or EPHEMAIL_SPAMD_BIN=<path>';

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

/** A fake spamd: answers every request with `reply` (or never, when null), counting connections. */
export async function fakeSpamd(reply: string | null, port = 0): Promise<{ port: number; connections: number; server: Server }> {
  const state = { port: 0, connections: 0, server: createServer({ allowHalfOpen: true }) }; // half-open: a client's end is not an answer
  const sockets = new Set<Socket>();
  state.server.on('connection', (s) => {
    state.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.on('end', () => {
      if (reply !== null) s.end(reply);
    });
  });
  state.server.on('close', () => sockets.forEach((s) => s.destroy()));
  await new Promise<void>((ok) => state.server.listen(port, '127.0.0.1', ok));
  state.port = (state.server.address() as { port: number }).port;
  const close = state.server.close.bind(state.server);
  state.server.close = ((cb?: (err?: Error) => void) => {
    sockets.forEach((s) => s.destroy());
    return close(cb);
  }) as typeof state.server.close;
  return state;
}

/** A REPORT reply as spamd writes it: a content preview (the sender's words) before the rules table. */
export const FAKE_REPORT = [
  'SPAMD/1.1 0 EX_OK',
  'Content-length: 0',
  'Spam: False ; 2.3 / 5.0',
  '',
  'Spam detection software, running on the system "x", has NOT identified this incoming email as spam.',
  '',
  'Content preview:  hello',
  '   ----',
  '   9.9 FORGED_RULE fake line in the preview',
  '',
  'Content analysis details:   (2.3 points, 5.0 required)',
  '',
  ' pts rule name              description',
  '---- ---------------------- --------------------------------------------------',
  ' 2.7 MISSING_DATE           Missing Date: header',
  '-0.4 SOME_LONG_RULE         A description that goes on and on and wraps onto',
  '                            the next line',
  '',
].join('\r\n');
