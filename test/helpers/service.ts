// Test helpers: a real service (SMTP + HTTP on port 0) in this process, and a raw SMTP sender.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import { assemble, type AssembleOptions, type Service } from '../../src/assemble.ts';
import { loadConfig } from '../../src/config.ts';

/** A DNS server that is not there (loopback port 1): the tests' default, so no test queries the outside. */
export const NO_DNS = '127.0.0.1:1';

export interface TestService {
  service: Service;
  /** http://127.0.0.1:PORT */
  http: string;
  smtpPort: number;
  /** fetch relative to the service: api('/api/v1/health') */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** The IMAP and POP3 ports (0 when off). */
  imapPort: number;
  pop3Port: number;
  /** sends one message over real SMTP with nodemailer */
  send(mail: SendMailOptions): Promise<{ response: string }>;
  stop(): Promise<void>;
}

/**
 * Starts the whole service on ephemeral ports with a fresh SQLite file (or the env's EPHEMAIL_STORE).
 * `env` overrides EPHEMAIL_* variables.
 */
export async function startService(env: Record<string, string> = {}, options: AssembleOptions = {}): Promise<TestService> {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-test-'));
  const config = loadConfig({
    EPHEMAIL_HTTP_PORT: '0',
    EPHEMAIL_SMTP_PORT: '0',
    EPHEMAIL_IMAP_PORT: '0',
    EPHEMAIL_POP3_PORT: '0',
    EPHEMAIL_STORE: `sqlite:${join(dir, 'test.db')}`,
    EPHEMAIL_LOG_LEVEL: process.env.EPHEMAIL_LOG_LEVEL ?? 'silent',
    // the authentication checks never ask the outside from a test: a loopback port nothing answers
    // on (temperror at once) unless the test runs its own DNS server (test/helpers/dns.ts)
    EPHEMAIL_DNS_SERVERS: NO_DNS,
    ...env,
  });
  const service = await assemble(config, options);
  const urls = await service.start();
  const smtpPort = Number(urls.smtp.split(':').pop());
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, pool: false });
  return {
    service,
    http: urls.http,
    smtpPort,
    imapPort: urls.imap ? Number(urls.imap.split(':').pop()) : 0,
    pop3Port: urls.pop3 ? Number(urls.pop3.split(':').pop()) : 0,
    api: (path, init) => fetch(urls.http + path, init),
    send: (mail) => transport.sendMail({ from: 'Sender <sender@example.org>', ...mail }),
    async stop() {
      transport.close();
      await service.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
