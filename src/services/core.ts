// What every use case needs, built once in assemble.ts and passed down (no module-level state).
// The backend's seams are here one by one (docs/architecture.md "Store seams"); its webhook queue
// and domain table are given only to the services that own them (webhooks.ts, domains.ts).
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Bus } from '../bus/bus.ts';
import type { Clock } from '../domain/clock.ts';
import type { Limiter } from '../limiter/limiter.ts';
import type { WorkerPool } from '../derive/pool.ts';
import type { Metrics } from '../metrics.ts';
import type { FaultStore } from '../store/faults.ts';
import type { KeyStore } from '../store/keys.ts';
import type { MailStore } from '../store/store.ts';
import type { AnswerCache } from './answers.ts';
import type { AuthenticationService } from './authentication.ts';
import type { DomainRegistry } from './domains.ts';
import type { ViewService } from './views.ts';
import type { WaitRegistry } from './wait.ts';
import type { WebhookService } from './webhooks.ts';

export interface Core {
  config: Config;
  /** Received mail: rows, messages and their views (store/store.ts). */
  store: MailStore;
  /** API keys (store/keys.ts); how many an IP mints is the limiter's. */
  keys: KeyStore;
  /** SMTP fault rules per address (store/faults.ts). */
  faults: FaultStore;
  bus: Bus;
  limiter: Limiter;
  clock: Clock;
  log: Logger;
  waits: WaitRegistry;
  /** The domains served: EPHEMAIL_DOMAINS and those added at run time (services/domains.ts). */
  domains: DomainRegistry;
  /** The one worker pool of derivations (derive/pool.ts): summaries, views and verdicts, each in a lane of its own. */
  workers: WorkerPool;
  /** Derived views of stored messages (bodies, attachments, agent text). */
  views: ViewService;
  /** The read model: final answers by email id, bounded by the bytes they hold (answers.ts). */
  answers: AnswerCache;
  /** SPF/DKIM/DMARC/ARC verdicts of stored messages, computed in the background (authentication.ts). */
  authentication: AuthenticationService;
  /** Webhook registrations and this node's delivery worker. */
  webhooks: WebhookService;
  /** Prometheus metrics, or null when EPHEMAIL_METRICS=false. */
  metrics: Metrics | null;
  /** `{base_url}`: EPHEMAIL_PUBLIC_URL, or http://localhost:<bound port> once HTTP listens. */
  baseUrl(): string;
  /** Whether the SMTP listener is accepting connections (health). */
  smtpRunning(): boolean;
  /** The IMAP and POP3 endpoints once bound (null: off or not yet listening; docs/imap.md). */
  mailAccess?(): { imap: MailEndpoint | null; pop3: MailEndpoint | null };
}

/** Where a mail client reads an inbox: the service's public host, the bound port, whether STARTTLS/STLS is offered. */
export interface MailEndpoint {
  host: string;
  port: number;
  starttls: boolean;
}
