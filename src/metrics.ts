// Prometheus metrics (prom-client), one registry per service instance (no global state): SMTP
// acceptance, refusals by reason, bytes and time from DATA end to 250; HTTP requests by route and
// status; derivation time; waits and streams held; store operation latency; webhook attempts. Served at GET /metrics
// outside the quota; EPHEMAIL_METRICS=false switches it off. docs/operations.md has example alerts.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from './store/store.ts';

export interface Metrics {
  registry: Registry;
  smtpAccepted: Counter<'recipients'>;
  smtpRefused: Counter<'reason'>;
  smtpBytes: Counter;
  smtpAckSeconds: Histogram;
  smtpCapped: Counter<'cap'>;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  /**
   * The requests of one route pattern, counted in plain numbers on the request path and added to
   * httpRequests when it is collected (a scrape): a labelled inc() builds and checks its label set
   * on every call, a cost every request paid.
   */
  httpRequestTally(route: string): (method: string, status: number) => void;
  derivationSeconds: Histogram<'outcome'>;
  storeSeconds: Histogram<'op'>;
  webhookDeliveries: Counter<'status'>;
  webhookSeconds: Histogram;
  /** Webhook events queued (one delivery each, with its retries). */
  webhookQueued: Counter;
  /** Webhook events not queued, by the fan-out limit that dropped them (message_limit, key_pending, hook_pending). */
  webhookDropped: Counter<'reason'>;
  idleCollections: Counter;
  /** IMAP and POP3 sessions opened (docs/imap.md). */
  mailSessions: Counter<'protocol'>;
  /** IMAP and POP3 commands, by protocol and command name (known names only). */
  mailCommands: Counter<'protocol' | 'command'>;
  /** Gauges read when scraped. */
  watch(name: string, help: string, read: () => number): void;
  /** A gauge read when scraped, one series per key of what `read` returns (the value of `label`). */
  watchEach(name: string, help: string, label: string, read: () => Record<string, number>): void;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'ephemail_' });
  /** Requests not yet added to httpRequests: route → method → status → count. */
  const tallies = new Map<string, Map<string, Map<number, number>>>();
  const m: Metrics = {
    registry,
    smtpAccepted: new Counter({ name: 'ephemail_smtp_messages_accepted_total', help: 'Messages answered 250 (each stored once, whatever its recipients)', labelNames: ['recipients'], registers: [registry] }),
    smtpRefused: new Counter({ name: 'ephemail_smtp_messages_refused_total', help: 'Messages refused after DATA, by reason', labelNames: ['reason'], registers: [registry] }),
    smtpBytes: new Counter({ name: 'ephemail_smtp_received_bytes_total', help: 'Bytes of accepted messages', registers: [registry] }),
    smtpAckSeconds: new Histogram({ name: 'ephemail_smtp_ack_seconds', help: 'Time from the end of DATA to the 250 (summary, durable store, wake-ups)', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers: [registry] }),
    smtpCapped: new Counter({ name: 'ephemail_smtp_capped_total', help: 'MAIL FROM (cap ip, 451 4.7.1) and RCPT (cap address, 452 4.2.2) deferred by the inbound caps', labelNames: ['cap'], registers: [registry] }),
    httpRequests: new Counter({
      name: 'ephemail_http_requests_total', help: 'HTTP requests by method, matched route pattern and status', labelNames: ['method', 'route', 'status'], registers: [registry],
      collect() {
        for (const [route, methods] of tallies) {
          for (const [method, statuses] of methods) {
            for (const [status, n] of statuses) if (n > 0) this.inc({ method, route, status: String(status) }, n);
            statuses.clear();
          }
        }
      },
    }),
    httpRequestTally(route) {
      let methods = tallies.get(route);
      if (!methods) tallies.set(route, (methods = new Map()));
      const byMethod = methods;
      return (method, status) => {
        let statuses = byMethod.get(method);
        if (!statuses) byMethod.set(method, (statuses = new Map()));
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      };
    },
    derivationSeconds: new Histogram({ name: 'ephemail_derivation_seconds', help: 'Time to derive a message\'s views (parse, sanitize, text, codes, links) in a worker, by outcome', labelNames: ['outcome'], buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [registry] }),
    storeSeconds: new Histogram({ name: 'ephemail_store_operation_seconds', help: 'Store operation latency by operation', labelNames: ['op'], buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5], registers: [registry] }),
    webhookDeliveries: new Counter({ name: 'ephemail_webhook_attempts_total', help: 'Webhook delivery attempts by outcome (delivered, retrying, gave_up)', labelNames: ['status'], registers: [registry] }),
    webhookSeconds: new Histogram({ name: 'ephemail_webhook_attempt_seconds', help: 'Time of one webhook delivery attempt (DNS, connect, response)', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry] }),
    webhookQueued: new Counter({ name: 'ephemail_webhook_events_queued_total', help: 'Webhook events queued (each is one delivery, with its retries)', registers: [registry] }),
    mailSessions: new Counter({ name: 'ephemail_mail_access_sessions_total', help: 'IMAP and POP3 sessions opened', labelNames: ['protocol'], registers: [registry] }),
    mailCommands: new Counter({ name: 'ephemail_mail_access_commands_total', help: 'IMAP and POP3 commands by name (unknown names as OTHER)', labelNames: ['protocol', 'command'], registers: [registry] }),
    idleCollections: new Counter({ name: 'ephemail_idle_collections_total', help: 'Full heap collections run because the process was quiet (src/idle-compact.ts)', registers: [registry] }),
    webhookDropped: new Counter({ name: 'ephemail_webhook_events_dropped_total', help: 'Webhook events not queued, by the fan-out limit that dropped them (message_limit, key_pending, hook_pending)', labelNames: ['reason'], registers: [registry] }),
    watch(name, help, read) {
      new Gauge({ name, help, registers: [registry], collect() { this.set(read()); } });
    },
    watchEach(name, help, label, read) {
      new Gauge({ name, help, labelNames: [label], registers: [registry], collect() { for (const [k, v] of Object.entries(read())) this.set({ [label]: k }, v); } });
    },
  };
  return m;
}

const TIMED: (keyof Store)[] = ['addEmails', 'listEmails', 'hasEmails', 'getEmail', 'readRaw', 'getViews', 'putViews', 'matchText', 'readPart', 'deleteEmail', 'purgeInbox', 'sweepExpired', 'addKey', 'findKey'];

/** The store with each operation's latency observed (the same object otherwise). */
export function timedStore(store: Store, histogram: Histogram<'op'>): Store {
  const out = Object.create(store) as Store;
  for (const op of TIMED) {
    const fn = (store[op] as (...a: unknown[]) => Promise<unknown>).bind(store);
    const child = histogram.labels(op); // resolved once: labelling per call costs more than the call
    (out as unknown as Record<string, unknown>)[op] = (...args: unknown[]) => {
      const t0 = performance.now();
      const p = fn(...args);
      const end = () => child.observe((performance.now() - t0) / 1000);
      p.then(end, end);
      return p;
    };
  }
  return out;
}
