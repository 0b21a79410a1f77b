// The one way tests and benchmarks start the real `ephemail` process (bin/ephemail.js). JSON log
// lines are read from stdout line by line (an unread pipe would stall the process). Ready means the
// `ephemail started` line named the bound addresses (ports 0), or, for a process whose log level hides
// that line (the benchmarks run at `warn`), the first 200 of /api/v1/health on two free ports chosen
// here. Killed with SIGKILL when the test or benchmark process exits.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = resolve(ROOT, 'bin/ephemail.js');

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface Served {
  child: ChildProcess;
  http: string;
  smtp: string;
  httpPort: number;
  smtpPort: number;
  /** ms from spawn to ready */
  startMs: number;
  /** The `ephemail started` log record ({} when ready by health). */
  startLine: Record<string, unknown>;
  /** Every JSON log line so far. */
  logs: Record<string, unknown>[];
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Kills the process (SIGKILL) and removes the store `tempSqlite` made; safe to call twice. */
  stop(): void;
}

export interface ServeOptions {
  /** Arguments after the script (default `serve`). */
  args?: string[];
  /** Node options before the script (e.g. --cpu-prof); default: those of package.json's `start` (START_NODE_ARGS). */
  nodeArgs?: string[];
  /** Another build's bin/ephemail.js (benchmarks compare two checkouts). */
  script?: string;
  cwd?: string;
  timeoutMs?: number;
  name?: string;
  /** false: only PATH and HOME from this process's environment. */
  inheritEnv?: boolean;
  /** 'log' (default): the start line; 'health': the health endpoint on ports chosen here. */
  ready?: 'log' | 'health';
  /**
   * A SQLite file of this name in a temporary directory made here (EPHEMAIL_STORE, unless `env`
   * names one), removed by `stop()`.
   */
  tempSqlite?: string;
}

/** A value of the process's /proc/<pid>/status (`VmRSS`, `VmHWM`: kB there), in bytes. */
export function procStatusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  if (!m) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(m[1]) * 1024;
}

/**
 * The Node options `npm start` runs the service with (package.json's `start` script: the young
 * generation's cap), so a spawned service is the one users run.
 */
const START_WORDS = (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')).scripts.start as string).split(/\s+/);
export const START_NODE_ARGS: string[] = START_WORDS.filter((w) => w.startsWith('--'));
/** The variables `start` sets before node (MALLOC_ARENA_MAX), given to every spawned service too. */
export const START_ENV: Record<string, string> = Object.fromEntries(
  START_WORDS.filter((w) => /^[A-Z_]+=/.test(w)).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
);

/**
 * A free TCP port on 127.0.0.1 (bound then released), chosen from 23000-29999: below Linux's ephemeral
 * range (32768 and up), where a port the kernel handed out and took back (`listen(0)`) may go to the
 * next `listen(0)` or outgoing connection of a test running beside this one before the process meant
 * to bind it does; and apart from the Redis servers' (test/redis/servers.ts: 20000-22699, +10000).
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 23000 + Math.floor(Math.random() * 7000);
    if (await portFree(port)) return port;
  }
  throw new Error('no free port in 23000-29999');
}

/** Whether `port` on 127.0.0.1 can be bound now (bound then released). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

export async function spawnServe(env: Record<string, string>, options: ServeOptions = {}): Promise<Served> {
  const name = options.name ?? 'ephemail';
  const timeoutMs = options.timeoutMs ?? 30_000;
  const byHealth = options.ready === 'health';
  const base = options.inheritEnv === false ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env;
  // IMAP and POP3 on free ports too: a second node on this host must not find 1143/1110 taken
  const ports = { ...(byHealth ? { EPHEMAIL_HTTP_PORT: String(await freePort()), EPHEMAIL_SMTP_PORT: String(await freePort()) } : { EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0' }), EPHEMAIL_IMAP_PORT: '0', EPHEMAIL_POP3_PORT: '0' };
  // EPHEMAIL_DNS_SERVERS: no spawned service asks the outside (authentication checks; test/helpers/service.ts NO_DNS)
  const storeDir = options.tempSqlite ? mkdtempSync(join(tmpdir(), `ephemail-${name}-`)) : null;
  const removeStore = () => storeDir && rmSync(storeDir, { recursive: true, force: true });
  const store = storeDir ? { EPHEMAIL_STORE: `sqlite:${join(storeDir, options.tempSqlite!)}` } : {};
  const fullEnv: Record<string, string | undefined> = { ...START_ENV, ...base, ...ports, EPHEMAIL_LOG_LEVEL: 'info', EPHEMAIL_DNS_SERVERS: '127.0.0.1:1', ...store, ...env };
  const spawned = performance.now();
  const child = spawn(process.execPath, [...(options.nodeArgs ?? START_NODE_ARGS), options.script ?? BIN, ...(options.args ?? ['serve'])], {
    cwd: options.cwd ?? ROOT,
    env: fullEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const logs: Record<string, unknown>[] = [];
  let out = '';
  let exited = false;
  child.stderr!.on('data', (d) => (out += d));
  const started = new Promise<Record<string, unknown>>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name}: not ready within ${timeoutMs} ms\n${out}`)), timeoutMs);
    // 'close', not 'exit': by then everything the process wrote has been read
    child.once('close', (code, signal) => {
      exited = true;
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
      if (!byHealth && rec.msg === 'ephemail started') {
        clearTimeout(timer);
        ok(rec);
      }
    });
    if (byHealth) {
      const url = `http://127.0.0.1:${fullEnv.EPHEMAIL_HTTP_PORT}/api/v1/health`;
      const poll = async () => {
        while (!exited) {
          try {
            if ((await fetch(url)).status === 200) {
              clearTimeout(timer);
              return ok({});
            }
          } catch {
            // not listening yet
          }
          await new Promise((r) => setTimeout(r, 5)); // poll: the health endpoint until the process answers (or exits)
        }
      };
      void poll();
    }
  });
  let startLine: Record<string, unknown>;
  try {
    startLine = await started;
  } catch (err) {
    child.kill('SIGKILL');
    removeStore();
    throw err;
  }
  const startMs = performance.now() - spawned;
  const http = byHealth ? `http://127.0.0.1:${fullEnv.EPHEMAIL_HTTP_PORT}` : String(startLine.http);
  const smtp = byHealth ? `127.0.0.1:${fullEnv.EPHEMAIL_SMTP_PORT}` : String(startLine.smtp);
  return { child, http, smtp, httpPort: Number(http.split(':').pop()), smtpPort: Number(smtp.split(':').pop()), startMs, startLine, logs, output: () => out,
    stop() {
      child.kill('SIGKILL');
      removeStore();
    },
  };
}
