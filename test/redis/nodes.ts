// Test helpers: real `ephemail serve` processes (bin/ephemail.js) on ports 0, found through their
// `ephemail started` log line, stopped with SIGTERM (SIGKILL after a bound); a raw SMTP sender.
import nodemailer from 'nodemailer';
import { spawnServe } from '../helpers/serve.ts';

export interface Node {
  name: string;
  http: string;
  smtpPort: number;
  /** Every log line so far (parsed JSON). */
  logs: Record<string, unknown>[];
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Sends one message over SMTP; resolves on the 250 with the reply, rejects with the SMTP error. */
  send(to: string | string[], subject: string, text?: string): Promise<{ response: string }>;
  /** Long-polls this node holds now (its /metrics gauge ephemail_waits_held). */
  heldWaits(): Promise<number>;
  /** Whether the process is still running. */
  alive(): boolean;
  stop(): Promise<number | null>;
  /** SIGKILL: the process dies where it is, with no shutdown. */
  kill(): Promise<void>;
}

/**
 * Starts several nodes at once; when one fails to start, the others that did are stopped before the
 * error is thrown (a test that failed in its `before` would otherwise leave them running, and the
 * test process waiting on them).
 */
export async function startNodes(names: string[], env: Record<string, string> | ((name: string) => Record<string, string>)): Promise<Node[]> {
  const settled = await Promise.allSettled(names.map((n) => startNode(n, typeof env === 'function' ? env(n) : env)));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<Node>).value);
  await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.kill() : undefined)));
  throw failed.reason;
}

export async function startNode(name: string, env: Record<string, string>): Promise<Node> {
  const { child, http, smtpPort, logs } = await spawnServe(env, { name, inheritEnv: false });
  return {
    name,
    http,
    smtpPort,
    logs,
    api: (path, init) => fetch(http + path, init),
    async send(to, subject, text = 'hello') {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, pool: false, connectionTimeout: 10_000, socketTimeout: 20_000 });
      try {
        return await transport.sendMail({ from: 'Sender <sender@example.org>', to, subject, text });
      } finally {
        transport.close();
      }
    },
    async heldWaits() {
      const text = await (await fetch(`${http}/metrics`)).text();
      const m = /^ephemail_waits_held (\d+)$/m.exec(text);
      if (!m) throw new Error(`${name}: no ephemail_waits_held in /metrics`);
      return Number(m[1]);
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
