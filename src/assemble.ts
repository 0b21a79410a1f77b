// The one composition root: config → clock, store, limiter, bus, services, SMTP, HTTP. Backends are
// chosen here and nowhere else (by the EPHEMAIL_STORE string).
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Backends } from './backends.ts';
import type { Store } from './store/store.ts';
import { createMemoryBus } from './bus/memory.ts';
import { redactStoreUrl, type Config } from './config.ts';
import { createWorkerPool } from './derive/pool.ts';
import { createAnswerCache } from './services/answers.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import { buildApp, type HttpTimeouts, type Mount } from './http/app.ts';
import { webhookEventJson } from './http/schemas/wire.ts';
import { createMemoryLimiter } from './limiter/memory.ts';
import { createMetrics, timedStore } from './metrics.ts';
import { startIdleCompaction } from './idle-compact.ts';
import { createSecureRandom } from './random.ts';
import type { Core } from './services/core.ts';
import { createDomainRegistry } from './services/domains.ts';
import { createAuthenticationService } from './services/authentication.ts';
import { createViewService } from './services/views.ts';
import { createWaitRegistry } from './services/wait.ts';
import { createWebhookService } from './services/webhooks.ts';
import { createSmtpReceiver, createSmtpReceiverWithTls, type SmtpListener } from './smtp/server.ts';
import { createSqliteStore } from './store/sqlite/sqlite-store.ts';
import { withReadCache } from './store/read-cache.ts';
import { createSqliteUids } from './store/sqlite/uids.ts';
import { createMemoryUids } from './store/uids.ts';
import { createImapServer, type MailListener } from './imap/server.ts';
import { createPop3Server } from './imap/pop3.ts';
import { createMailTls } from './imap/tls.ts';

export type { Backends } from './backends.ts';

/** Opens the store named by EPHEMAIL_STORE, with the bus and limiter that fit it. */
export async function openBackends(config: Config, log: Logger): Promise<Backends> {
  if (config.store.startsWith('sqlite:')) {
    const path = config.store.slice('sqlite:'.length);
    return {
      store: createSqliteStore(path === ':memory:' ? ':memory:' : path, { random: createSecureRandom() }), bus: createMemoryBus(), limiter: createMemoryLimiter(),
      // IMAP UIDs in a file of their own beside the database (store/sqlite/uids.ts)
      uids: path === ':memory:' ? createMemoryUids() : createSqliteUids(`${path}-imap`),
    };
  }
  // Redis is loaded lazily: a SQLite deployment never imports ioredis.
  const { openRedisBackends } = await import('./assemble-redis.ts');
  return openRedisBackends(config, log);
}

export { redactStoreUrl } from './config.ts';

export function createLogger(config: Config): Logger {
  return pino({
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]'], censor: '[redacted]' },
  });
}

export interface Service {
  core: Core;
  /** The backend as the services use it (read cache, timing): every seam, for tests and health drills. */
  store: Store;
  app: FastifyInstance;
  smtp: SmtpListener;
  /** The IMAP and POP3 listeners (docs/imap.md); null when turned off. */
  imap: MailListener | null;
  pop3: MailListener | null;
  /** Binds HTTP, SMTP, IMAP and POP3; resolves with the bound addresses (imap/pop3 absent when off). */
  start(): Promise<{ http: string; smtp: string; imap?: string; pop3?: string }>;
  /** Stops SMTP accepts, answers held long-polls, closes HTTP, bus, limiter and store; idempotent. */
  stop(): Promise<void>;
}

export interface AssembleOptions {
  log?: Logger;
  clock?: Clock;
  backends?: Backends;
  /** Extra faces (tool endpoint, web pages); defaults to every face this build has. */
  mounts?: Mount[];
  sweepIntervalMs?: number;
  /** Budgets of the authentication verdicts (tests shorten them). */
  authentication?: { budgetMs?: number; queryTimeoutMs?: number };
  /** HTTP client timeouts (tests shorten them); defaults: http/app.ts HTTP_TIMEOUTS. */
  httpTimeouts?: HttpTimeouts;
}

export async function defaultMounts(): Promise<Mount[]> {
  const mounts: Mount[] = [];
  const { registerMcp } = await import('./mcp/endpoint.ts');
  mounts.push(registerMcp);
  const { registerWeb } = await import('./web/routes.ts');
  mounts.push(registerWeb);
  return mounts;
}

export async function assemble(config: Config, options: AssembleOptions = {}): Promise<Service> {
  const log = options.log ?? createLogger(config);
  const clock = options.clock ?? systemClock;
  const backends = options.backends ?? (await openBackends(config, log));
  const { bus, limiter } = backends;
  const metrics = config.metrics ? createMetrics() : null;
  // read caching over the (timed) backend: store metrics count the backend's own reads
  const store = withReadCache(metrics ? timedStore(backends.store, metrics.storeSeconds) : backends.store);
  let boundHttpPort = config.httpPort;
  // the IMAP and POP3 ports once bound (GET /api/v1 lists them)
  const mailPorts: { imap: number | null; pop3: number | null; starttls: boolean } = { imap: null, pop3: null, starttls: false };
  let smtpListener: SmtpListener | null = null;
  const baseUrl = () => config.publicUrl ?? `http://localhost:${boundHttpPort}`;
  // the added domains are read before anything serves (a store down now: EPHEMAIL_DOMAINS only, and
  // 451/500 for any other domain until it answers; the registry logs it)
  const domains = createDomainRegistry({ config, store: store.domains, clock, log });
  await domains.refresh().catch(() => undefined);
  // the one pool of derivation workers: SMTP's summaries, views and verdicts each in a lane of its own
  const workers = createWorkerPool({ warn: (msg, err) => log.warn({ err }, msg) });
  // the read model: one cache of final answers (services/answers.ts), told of every write that changes one
  const answers = createAnswerCache(config.answerCacheBytes);
  const core: Core = {
    config,
    store,
    keys: store,
    faults: store.faults,
    bus,
    limiter,
    clock,
    log,
    waits: createWaitRegistry(bus, { maxHeld: config.maxHeldWaits, clock }),
    domains,
    workers,
    answers,
    views: createViewService(store, config, log, { pool: workers.derive, spamd: config.spamd, onWritten: answers.forgetMessage, onDerived: metrics ? (seconds, outcome) => metrics.derivationSeconds.observe({ outcome }, seconds) : undefined }),
    authentication: createAuthenticationService(store, config, log, { pool: workers.verdicts, dnsServers: config.dnsServers, authservId: config.domains[0], ...options.authentication }),
    webhooks: createWebhookService({ hooks: store.webhooks, keys: store, config, domains, clock, log, metrics, eventJson: (e) => webhookEventJson({ baseUrl }, e) }),
    metrics,
    baseUrl,
    smtpRunning: () => smtpListener?.running ?? false,
    mailAccess: () => {
      const host = new URL(baseUrl()).hostname;
      const at = (port: number | null) => (port === null ? null : { host, port, starttls: mailPorts.starttls });
      return { imap: at(mailPorts.imap), pop3: at(mailPorts.pop3) };
    },
  };
  const smtp = config.smtpTls.mode === 'off' ? createSmtpReceiver(core) : await createSmtpReceiverWithTls(core);
  smtpListener = smtp;
  if (metrics) {
    metrics.watch('ephemail_waits_held', 'Long-polls held now (HTTP wait and MCP check_inbox)', () => core.waits.held);
    metrics.watch('ephemail_smtp_connections', 'SMTP connections open now', () => smtp.server.connections.size);
    metrics.watch('ephemail_webhook_deliveries_in_flight', 'Webhook deliveries this node runs now', () => core.webhooks.inFlight);
    metrics.watch('ephemail_domains_active', 'Domains this node takes new mail for (EPHEMAIL_DOMAINS and those added at run time)', () => domains.active().length);
    if (config.smtpTls.mode !== 'off') metrics.watch('ephemail_smtp_tls_certificate_expiry_timestamp_seconds', 'When the STARTTLS certificate new sessions get expires (Unix time)', () => (smtp.tlsNotAfter() ?? 0) / 1000);
    metrics.watch('ephemail_answer_cache_hits', 'Email reads answered from the read model since start', () => answers.stats.hits);
    metrics.watch('ephemail_answer_cache_misses', 'Email reads the read model did not hold since start', () => answers.stats.misses);
    metrics.watch('ephemail_answer_cache_bytes', 'Bytes the read model holds now (EPHEMAIL_ANSWER_CACHE_BYTES at most)', () => answers.stats.bytes);
    metrics.watchEach('ephemail_worker_threads', 'Worker threads running now, by lane: each starts when first needed and stops after 10 s without work (derive/pool.ts)', 'lane', () => ({ summary: workers.summary.size, derive: workers.derive.size, verdicts: workers.verdicts.size }));
    metrics.watch('ephemail_verdicts_waiting', 'Messages whose authentication verdicts wait for the verdicts worker', () => core.authentication.waiting);
    metrics.watch('ephemail_derivations_waiting', 'Derivations of views (and search texts of older mail) waiting for a worker', () => core.views.waiting);
  }
  const app = await buildApp(core, options.mounts ?? (await defaultMounts()), options.httpTimeouts);
  // IMAP and POP3 (docs/imap.md): the same store, limits and bus; STARTTLS/STLS with SMTP's TLS setting
  const uids = backends.uids ?? createMemoryUids();
  const mailTls = config.imapPort === null && config.pop3Port === null ? null : createMailTls(smtp);
  const imap = config.imapPort === null ? null : createImapServer(core, uids, mailTls);
  const pop3 = config.pop3Port === null ? null : createPop3Server(core, uids, mailTls);
  mailPorts.starttls = mailTls !== null;
  if (metrics) {
    if (imap) metrics.watch('ephemail_imap_sessions', 'IMAP sessions open now', () => imap.sessions);
    if (pop3) metrics.watch('ephemail_pop3_sessions', 'POP3 sessions open now', () => pop3.sessions);
  }

  let sweeper: NodeJS.Timeout | null = null;
  let stopCompaction: (() => void) | null = null;
  let stopped: Promise<void> | null = null;

  return {
    core,
    store,
    app,
    smtp,
    imap,
    pop3,
    async start() {
      await app.listen({ port: config.httpPort, host: config.httpHost });
      const httpAddr = app.server.address() as AddressInfo;
      boundHttpPort = httpAddr.port;
      const smtpAddr = await smtp.listen(config.smtpPort, config.smtpHost);
      const sweep = () => (answers.sweep(clock.now()), store.sweepExpired(clock.now())).then(
        (n) => n > 0 && log.debug({ deleted: n }, 'expired emails deleted'),
        (err) => log.warn({ err }, 'sweep failed; reads still hide expired mail'),
      );
      void sweep();
      // (no worker starts here: each lane starts its own on first use and stops it when idle, so an
      // idle service holds no derivation threads: docs/architecture.md "Memory")
      sweeper = setInterval(sweep, options.sweepIntervalMs ?? 30_000);
      core.webhooks.start();
      domains.start();
      sweeper.unref();
      const host = (a: AddressInfo) => (a.family === 'IPv6' ? `[${a.address}]` : a.address);
      const urls: { http: string; smtp: string; imap?: string; pop3?: string } = { http: `http://${host(httpAddr)}:${httpAddr.port}`, smtp: `${host(smtpAddr)}:${smtpAddr.port}` };
      if (imap && config.imapPort !== null) {
        const a = await imap.listen(config.imapPort, config.imapHost);
        urls.imap = `${host(a)}:${a.port}`;
        mailPorts.imap = a.port;
      }
      if (pop3 && config.pop3Port !== null) {
        const a = await pop3.listen(config.pop3Port, config.pop3Host);
        urls.pop3 = `${host(a)}:${a.port}`;
        mailPorts.pop3 = a.port;
      }
      log.info({ ...urls, public_url: core.baseUrl(), store: redactStoreUrl(config.store), domains: domains.active() }, 'ephemail started');
      stopCompaction = startIdleCompaction({ onCollect: () => metrics?.idleCollections.inc() });
      return urls;
    },
    stop() {
      stopped ??= (async () => {
        if (sweeper) clearInterval(sweeper);
        stopCompaction?.();
        domains.stop();
        const smtpClosed = smtp.close(); // stop accepting; transactions in flight finish
        const mailClosed = Promise.all([imap?.close(), pop3?.close()]);
        core.waits.releaseAll(); // held polls answer with their (empty) result
        await app.close();
        await smtpClosed;
        await mailClosed;
        await core.webhooks.stop();
        await bus.close();
        await limiter.close();
        await core.views.close();
        await core.authentication.close();
        await workers.close();
        await store.close();
        await uids.close();
      })();
      return stopped;
    },
  };
}
