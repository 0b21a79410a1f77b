// Test helpers: real `ephemail serve` processes (bin/ephemail.js) on ports 0, found through their
// `ephemail started` log line, stopped with SIGTERM (SIGKILL after a bound); a raw SMTP sender.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import nodemailer from 'nodemailer';

const root = resolve(import.meta.dirname, '../..');
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface Node {
  name: string;
  http: string;
  smtpPort: number;
  /** Every log line so far (parsed JSON). */
  logs: Record<string, unknown>[];
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Sends one message over SMTP; resolves on the 250 with the reply, rejects with the SMTP error. */
  send(to: string | string[], subject: string, text?: string): Promise<{ response: string }>;
  /** Whether the process is still running. */
  alive(): boolean;
  stop(): Promise<number | null>;
  /** SIGKILL: the process dies where it is, with no shutdown. */
  kill(): Promise<void>;
}

export async function startNode(name: string, env: Record<string, string>): Promise<Node> {
  const child = spawn(process.execPath, ['bin/ephemail.js', 'serve'], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const started = new Promise<{ http: string; smtp: string }>((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no 'ephemail started' within 30 s\n${stderr}`)), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before starting\n${stderr}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(rec);
      if (rec.msg === 'ephemail started') {
        clearTimeout(timer);
        resolveStart({ http: String(rec.http), smtp: String(rec.smtp) });
      }
    });
  });
  let urls: { http: string; smtp: string };
  try {
    urls = await started;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const smtpPort = Number(urls.smtp.split(':').pop());
  return {
    name,
    http: urls.http,
    smtpPort,
    logs,
    api: (path, init) => fetch(urls.http + path, init),
    async send(to, subject, text = 'hello') {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, pool: false, connectionTimeout: 10_000, socketTimeout: 20_000 });
      try {
        return await transport.sendMail({ from: 'Sender <sender@example.org>', to, subject, text });
      } finally {
        transport.close();
      }
    },
    alive: () => child.exitCode === null && child.signalCode === null,
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(kill);
      return code;
    },
  };
}
