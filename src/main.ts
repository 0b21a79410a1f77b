// Entry: `ephemail [serve]`, `ephemail keys list|revoke <prefix>`, `ephemail domains list|add|retire <domain>`.
import { assemble, createLogger, openBackends, redactStoreUrl } from './assemble.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { iso, systemClock } from './domain/clock.ts';
import { AppError } from './domain/errors.ts';
import { addDomain, listDomains, retireDomain, type DomainEntry } from './services/domains.ts';
import { startHint } from './start-hint.ts';

const USAGE = `Usage:
  ephemail [serve]               start the SMTP receiver, HTTP API, tool endpoint and web pages
  ephemail keys list             list API keys (prefix, label, created_at, revoked)
  ephemail keys revoke <prefix>  revoke every key whose prefix starts with <prefix>
  ephemail domains list          list domains (source, state, when added or retired)
  ephemail domains add <domain>  take mail at <domain> too, on every node within 2 s
  ephemail domains retire <domain>
                                 take no new mail at <domain>; its stored mail stays readable until it expires
Configuration is read from EPHEMAIL_* environment variables (see README).`;

const SIGHUP_SAYS = {
  off: 'SIGHUP: no STARTTLS certificate files to re-read',
  unchanged: 'SIGHUP: STARTTLS certificate unchanged',
  reloaded: 'SIGHUP: STARTTLS certificate reloaded',
  failed: 'SIGHUP: STARTTLS certificate not reloaded (the error is logged); the one in use stays',
} as const;

async function serve(config: Config): Promise<void> {
  const service = await assemble(config);
  const { log } = service.core;
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error('shutdown took over 15 s; exiting');
      process.exit(1);
    }, 15_000);
    force.unref();
    service.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // SIGHUP re-reads the STARTTLS certificate files (they are also re-read when they change)
  process.on('SIGHUP', () => {
    service.smtp.reloadTls('SIGHUP').then(
      (outcome) => log.info({ signal: 'SIGHUP', outcome }, SIGHUP_SAYS[outcome]),
      (err) => log.error({ err }, 'SIGHUP: re-reading the STARTTLS certificate failed'),
    );
    // (IMAP and POP3 take SMTP's pair: re-read once, for all three: docs/imap.md)
  });
  try {
    const urls = await service.start();
    if (process.stdout.isTTY) console.log(banner(config, service.core.domains.active(), service.core.baseUrl(), urls.smtp, urls));
  } catch (err) {
    const hint = startHint(err, config);
    if (hint) console.error(`ephemail: ${hint}`);
    else log.fatal({ err }, 'could not start');
    await service.stop().catch(() => undefined);
    process.exit(1);
  }
}

/** What a person starting the service in a terminal wants to see (JSON logs follow). */
function banner(config: Config, domains: readonly string[], base: string, smtp: string, mail: { imap?: string; pop3?: string } = {}): string {
  return [
    '',
    `  ephemail is running: disposable inboxes at ${domains.join(', ')}`,
    '',
    `  Web page   ${base}/`,
    `  API        ${base}/api/v1   (reference: ${base}/docs)`,
    `  MCP        ${base}/mcp`,
    `  SMTP       ${smtp}   (send mail to anything@${domains[0]})`,
    ...(mail.imap ? [`  IMAP       ${mail.imap}   (user: the inbox address, any password; docs/imap.md)`] : []),
    ...(mail.pop3 ? [`  POP3       ${mail.pop3}`] : []),
    `  Store      ${redactStoreUrl(config.store)}`,
    '',
    '  Ctrl+C stops it.',
    '',
  ].join('\n');
}

async function keys(config: Config, args: string[]): Promise<number> {
  const log = createLogger({ ...config, logLevel: 'warn' });
  const { store, bus, limiter } = await openBackends(config, log);
  try {
    if (args[0] === 'list') {
      const all = await store.listKeys();
      if (all.length === 0) console.log('no keys');
      for (const k of all) {
        console.log([k.prefix, JSON.stringify(k.label), iso(k.createdAt), k.revokedAt ? `revoked ${iso(k.revokedAt)}` : 'active'].join('\t'));
      }
      return 0;
    }
    if (args[0] === 'revoke' && args[1]) {
      const prefix = args[1];
      if (!/^eph_[0-9A-Za-z]{8}$/.test(prefix)) {
        console.error('Name the key by its whole 12-character prefix (eph_ and 8 more, as `ephemail keys list` and GET /api/v1/me show it), so one command revokes exactly one key.');
        return 2;
      }
      const revoked = await store.revokeKeys(prefix, systemClock.now());
      if (revoked.length === 0) {
        console.error(`No active key has a prefix starting with ${prefix}`);
        return 1;
      }
      for (const k of revoked) console.log(`revoked ${k.prefix}\t${JSON.stringify(k.label)}\tcreated ${iso(k.createdAt)}`);
      return 0;
    }
    console.error(USAGE);
    return 2;
  } finally {
    await bus.close();
    await limiter.close();
    await store.close();
  }
}

const when = (ms: number | null) => (ms === null ? '-' : iso(ms));
const domainLine = (d: DomainEntry) => [d.domain, d.source, d.state, `added ${when(d.addedAt)}`, `retired ${when(d.retiredAt)}`].join('\t');

/** `ephemail domains …`: 0 done, 1 refused (the message says why), 2 a usage error. */
async function domains(config: Config, args: string[]): Promise<number> {
  const [verb, name, extra] = args;
  const usable = (verb === 'list' && name === undefined) || ((verb === 'add' || verb === 'retire') && name !== undefined && extra === undefined);
  if (!usable) {
    console.error(USAGE);
    return 2;
  }
  const log = createLogger({ ...config, logLevel: 'warn' });
  const { store, bus, limiter } = await openBackends(config, log);
  try {
    if (verb === 'list') {
      for (const d of await listDomains(config, store.domains)) console.log(domainLine(d));
      return 0;
    }
    if (verb === 'add') {
      const { entry, created } = await addDomain(config, store.domains, name, systemClock.now());
      console.log(`${created ? 'added' : 'already active'}\t${domainLine(entry)}`);
      return 0;
    }
    console.log(`retired\t${domainLine(await retireDomain(config, store.domains, name, systemClock.now()))}`);
    return 0;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    console.error(`ephemail: ${err.message}`);
    return err.type === 'invalid_request' ? 2 : 1;
  } finally {
    await bus.close();
    await limiter.close();
    await store.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return;
  }
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`ephemail: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  if (command === 'serve') return serve(config);
  if (command === 'keys' || command === 'domains') {
    const code = await (command === 'keys' ? keys : domains)(config, rest).catch((err: unknown) => {
      console.error(`ephemail: the store (${redactStoreUrl(config.store)}) could not be used: ${err instanceof Error ? err.message : String(err)}`);
      return 1;
    });
    process.exit(code);
  }
  console.error(`ephemail: unknown command ${JSON.stringify(command)}\n${USAGE}`);
  process.exit(2);
}

await main(process.argv.slice(2));
