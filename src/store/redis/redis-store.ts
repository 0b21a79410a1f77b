// The Redis Store: the same contract as the SQLite store (store.ts), shared by every node. Emails and
// attachments expire by Redis itself (PEXPIREAT at expiresAt); reads also filter on `now`, so a list
// never shows expired mail. Ids are assigned inside the write script from the server's TIME.
import { randomInt, randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '../../domain/errors.ts';
import type { EmailSummary } from '../../domain/summary.ts';
import { summaryOf, type ListQuery, type NewEmail, type Store, type StoredBytes, type StoredEmail, parseEnvelope, type StoredAuthentication } from '../store.ts';
import { call, closeClient, replicatedScript, script, type RedisClient, type ScriptArg as Arg } from '../../redis/client.ts';
import { addressSlot, idSlot, type Keyspace } from '../../redis/keys.ts';
import * as lua from './scripts.ts';
import { createRedisDomains } from './domains.ts';
import { createRedisWebhooks } from './webhooks.ts';
import { bodyFor, type DroppedJob, type EventBody, type MailEvents, type NewDeliveryJob, type PendingCaps } from '../webhooks.ts';
import { WEBHOOK_FANOUT } from '../../domain/limits.ts';
import { createRedisFaults } from './faults.ts';
import { createRedisKeys } from './keys.ts';

const CHUNK = 256 * 1024;
const SWEEP_BATCH = 500;
const SWEEP_PARALLEL = 16;
const PING_TIMEOUT_MS = 2000;



type StoredSummary = Omit<EmailSummary, 'id'>;

/** The delivery log's line for an event the sweep queued late and a cap refused. */
const DROPPED_LATE: Record<DroppedJob['reason'], string> = {
  hook_pending: `not queued: this webhook already had ${WEBHOOK_FANOUT.pendingPerHook} events waiting for delivery when the event was moved to the queue`,
  key_pending: `not queued: this key's webhooks already had ${WEBHOOK_FANOUT.pendingPerKey} events waiting for delivery when the event was moved to the queue`,
};

export interface RedisStoreOptions {
  client: RedisClient;
  keys: Keyspace;
  /** Cluster: ids are sequenced per slot (docs/scaling.md "Ids"); standalone: one global sequence. */
  cluster: boolean;
  /** Quits the client on close (default true). */
  ownsClient?: boolean;
  /** Replicas that must acknowledge each write a 250 or a new key depends on (EPHEMAIL_REDIS_MIN_REPLICAS). */
  minReplicas?: number;
}

export function createRedisStore(options: RedisStoreOptions): Store {
  const { client, keys: k, cluster } = options;
  const replicas = options.minReplicas ?? 0;
  const run = {
    // the writes a 250 or a new key depends on wait for their replicas (replicatedScript)
    add: replicatedScript(client, 'ephAddEmails', lua.ADD_EMAILS, 1, replicas),
    list: script(client, 'ephListEmails', lua.LIST_EMAILS, 1),
    del: script(client, 'ephDeleteEmail', lua.DELETE_EMAIL, 1),
    addMessage: replicatedScript(client, 'ephAddMessage', lua.ADD_MESSAGE, 2, replicas),
    unref: script(client, 'ephUnrefMessage', lua.UNREF_MESSAGE, 1),
    putViews: script(client, 'ephPutViews', lua.PUT_VIEWS, 1),
    match: script(client, 'ephMatchText', lua.MATCH_TEXT, 1),
    putSearch: script(client, 'ephPutSearchText', lua.PUT_SEARCH_TEXT, 1),
    putAuth: script(client, 'ephPutAuth', lua.PUT_AUTH, 1),
    purge: script(client, 'ephPurgeInbox', lua.PURGE_INBOX, 1),
    sweep: script(client, 'ephSweepSlot', lua.SWEEP_SLOT, 1),
  };
  const webhooks = createRedisWebhooks(client, k.prefix, replicas);
  /** Slots this node already recorded in `slotsInUse` since its last sweep. */
  const slotsSeen = new Set<number>();

  /**
   * The rows of one script (all of them, or one slot's on Cluster), and their webhook events written
   * to the outbox of that slot (`<slot base>wo`) in the same script. `at`: each email's position in
   * addEmails' list.
   */
  async function addGroup(slot: number | null, emails: NewEmail[], keyOf: Map<Uint8Array, string>, at: number[], events?: MailEvents): Promise<string[]> {
    const args: Arg[] = [emails.length];
    for (const e of emails) {
      const s = addressSlot(e.address);
      const { id: _none, ...summary }: EmailSummary = summaryOf('', e);
      args.push(k.slotBase(s), e.address, s * 2 ** 18 + randomInt(2 ** 18), randomInt(2 ** 30), e.expiresAt, JSON.stringify(summary), keyOf.get(e.raw)!);
    }
    const local = new Map(at.map((pos, i) => [pos, i + 1]));
    const jobs = events?.jobs.filter((j) => local.has(j.email)) ?? [];
    if (jobs.length) {
      args.push(`${k.slotBase(addressSlot(emails[0].address))}wo`);
      const bodies = [...events!.bodies].filter(([pos]) => local.has(pos));
      args.push(bodies.length);
      for (const [pos, pieces] of bodies) args.push(local.get(pos)!, pieces.length, ...pieces);
      args.push(jobs.length);
      let latest = 0;
      for (const j of jobs) {
        // the job's JSON up to its email id, which the script appends (with the closing '"}')
        const head = JSON.stringify({ id: j.id, webhookId: j.webhookId, keyHash: j.keyHash, dueAt: j.dueAt, expiresAt: j.expiresAt, emailId: '' }).slice(0, -2);
        args.push(local.get(j.email)!, j.id, head);
        latest = Math.max(latest, j.expiresAt);
      }
      args.push(latest);
    }
    return (await run.add([k.sequence(slot)], args)) as string[];
  }

  /**
   * Queues webhook events already stored in an outbox (`<slot base>wo`) and takes them out of it.
   * The queue's slot is another one on Cluster, so this is a second write: run right after the mail's
   * (addEmails) and, for events a failure left behind, by the sweep. enqueue() queues a job id once
   * however often it is given (its `q:` mark), so running this twice queues nothing twice.
   */
  async function moveOutbox(outbox: string, bodies: EventBody[], jobs: NewDeliveryJob[], caps: PendingCaps): Promise<DroppedJob[]> {
    const dropped = await webhooks.enqueue(bodies, jobs, caps);
    await client.hdel(outbox, ...bodies.map((b) => `b:${b.emailId}`), ...jobs.map((j) => `j:${j.id}`));
    return dropped;
  }

  /** The sweep's part: events an outbox still holds (their move failed or its node died) are queued now. */
  async function drainOutbox(slot: number): Promise<void> {
    const outbox = `${k.slotBase(slot)}wo`;
    const all = await client.hgetall(outbox);
    const bodies: EventBody[] = [];
    const jobs: NewDeliveryJob[] = [];
    for (const [field, value] of Object.entries(all)) {
      if (field.startsWith('j:')) jobs.push(JSON.parse(value) as NewDeliveryJob);
    }
    for (const [field, value] of Object.entries(all)) {
      const emailId = field.slice(2);
      if (field.startsWith('b:')) bodies.push({ emailId, payload: value, expiresAt: Math.max(0, ...jobs.filter((j) => j.emailId === emailId).map((j) => j.expiresAt)) });
    }
    if (jobs.length === 0) {
      if (bodies.length) await client.hdel(outbox, ...bodies.map((b) => `b:${b.emailId}`));
      return;
    }
    const dropped = await moveOutbox(outbox, bodies, jobs, { perKey: WEBHOOK_FANOUT.pendingPerKey, perHook: WEBHOOK_FANOUT.pendingPerHook });
    if (dropped.length) {
      const at = Date.now();
      await webhooks.appendLog(dropped.map(({ job, reason }) => ({
        webhookId: job.webhookId,
        attempt: { jobId: job.id, emailId: job.emailId, attempt: 0, at, status: 'dropped' as const, responseCode: null, error: DROPPED_LATE[reason], nextRetryAt: null },
      })));
    }
  }

  async function addEmails(emails: NewEmail[], withEvents?: MailEvents): Promise<StoredEmail[]> {
    if (emails.length === 0) return [];
    // each message once, before the rows that reference it (its own slot: a random key's hash tag)
    const messages = new Map<Uint8Array, { rows: number; expiresAt: number; searchText?: string; envelope?: string }>();
    for (const e of emails) {
      const m = messages.get(e.raw);
      if (!m) messages.set(e.raw, { rows: 1, expiresAt: e.expiresAt, searchText: e.searchText, envelope: e.envelope ? JSON.stringify(e.envelope) : undefined });
      else {
        m.rows++;
        m.expiresAt = Math.max(m.expiresAt, e.expiresAt);
      }
    }
    const keyOf = new Map<Uint8Array, string>();
    await Promise.all([...messages].map(([raw, m]) => {
      const mk = randomUUID();
      keyOf.set(raw, mk);
      const base = k.message(mk);
      const args: Arg[] = [Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), m.rows, m.expiresAt, m.envelope ?? ''];
      if (m.searchText !== undefined) args.push(m.searchText);
      return run.addMessage([base, `${base}:r`], args);
    }));
    const slots = [...new Set(emails.map((e) => addressSlot(e.address)))];
    const fresh = slots.filter((s) => !slotsSeen.has(s));
    if (fresh.length) {
      await client.sadd(k.slotsInUse, ...fresh);
      for (const s of fresh) slotsSeen.add(s);
    }
    const ids: string[] = new Array(emails.length);
    const events = withEvents?.jobs.length ? withEvents : undefined;
    /** Each script's outbox and the email positions it wrote (when it wrote events). */
    const outboxes: [string, number[]][] = [];
    if (!cluster) {
      const all = emails.map((_, i) => i);
      (await addGroup(null, emails, keyOf, all, events)).forEach((id, i) => (ids[i] = id));
      if (events) outboxes.push([`${k.slotBase(addressSlot(emails[0].address))}wo`, all]);
    } else {
      // one script per slot: the inbox is the unit of atomicity and order on Cluster
      const groups = new Map<number, number[]>();
      emails.forEach((e, i) => {
        const s = addressSlot(e.address);
        groups.set(s, [...(groups.get(s) ?? []), i]);
      });
      await Promise.all([...groups].map(async ([s, idx]) => {
        (await addGroup(s, idx.map((i) => emails[i]), keyOf, idx, events)).forEach((id, j) => (ids[idx[j]] = id));
        if (events?.jobs.some((j) => idx.includes(j.email))) outboxes.push([`${k.slotBase(s)}wo`, idx]);
      }));
    }
    if (events) {
      // the events are stored with the mail; queueing them is a second write (another slot on
      // Cluster): a failure leaves them in the outbox for the sweep, and the mail is acknowledged
      events.dropped = [];
      // one outbox after the other, in the emails' order: the caps refuse the same events as on
      // SQLite (the later emails'), whichever slot answers first (all go to the one {wh} slot anyway)
      outboxes.sort((x, y) => x[1][0] - y[1][0]); // filled as the slots' scripts answered
      for (const [outbox, idx] of outboxes) {
        const jobs = events.jobs.filter((j) => idx.includes(j.email)).map(({ email, ...j }) => ({ ...j, emailId: ids[email] }));
        const bodies = [...events.bodies].filter(([pos]) => idx.includes(pos)).map(([pos, pieces]) => ({ emailId: ids[pos], payload: bodyFor(pieces, ids[pos]), expiresAt: emails[pos].expiresAt }));
        try {
          events.dropped!.push(...(await moveOutbox(outbox, bodies, jobs, events.caps)));
        } catch {
          events.deferred = true;
        }
      }
    }
    return emails.map((e, i) => ({ ...summaryOf(ids[i], e), messageKey: keyOf.get(e.raw)! }));
  }

  /** One row fewer references these messages; the last one frees it. */
  async function unref(messageKeys: string[]): Promise<void> {
    await Promise.all(messageKeys.filter(Boolean).map((mk) => run.unref([k.message(mk)], [k.message(mk)])));
  }

  async function listEmails(address: string, query: ListQuery, now: number): Promise<EmailSummary[]> {
    const [mode, cursor] = query.since ? ['s', query.since.toLowerCase()] : query.before ? ['b', query.before.toLowerCase()] : ['n', ''];
    const flat = (await run.list([k.index(address)], [k.slotBase(addressSlot(address)), mode, cursor, query.limit, now])) as string[];
    const out: EmailSummary[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i], ...(JSON.parse(flat[i + 1]) as StoredSummary) });
    return out;
  }

  /** matchText: each live row's message key, then one find per distinct message, inside Redis. */
  async function matchText(ids: string[], needle: string, now: number): Promise<(boolean | null)[]> {
    const keys = await Promise.all(ids.map(async (id) => {
      const [m, x] = await client.hmget(k.email(id.toLowerCase()), 'm', 'x');
      return m !== null && x !== null && Number(x) > now ? m : null;
    }));
    const found = new Map<string, Promise<boolean | null>>();
    for (const mk of keys) {
      if (mk !== null && !found.has(mk)) found.set(mk, run.match([k.message(mk)], [needle]).then((r) => (Number(r) < 0 ? null : Number(r) === 1)));
    }
    return Promise.all(keys.map((mk) => (mk === null ? null : found.get(mk)!)));
  }

  /** A string value read in chunks as they are consumed (GETRANGE); null when missing. */
  async function bytes(key: string): Promise<StoredBytes | null> {
    const [[, exists], [, size]] = ((await client.multi().exists(key).strlen(key).exec()) ?? []) as [unknown, number][];
    if (!exists) return null;
    async function* chunks(): AsyncIterable<Uint8Array> {
      for (let offset = 0; offset < size; offset += CHUNK) {
        const b = await call(() => client.getrangeBuffer(key, offset, Math.min(size, offset + CHUNK) - 1));
        if (!b.length) return; // deleted or expired while streaming
        yield b;
      }
    }
    return { sizeBytes: size, chunks: chunks() };
  }

  async function sweepSlot(slot: number, now: number): Promise<number> {
    let removed = 0;
    for (let round = 0; round < 10_000; round++) {
      const [n, left, outbox, ...mks] = (await run.sweep([`${k.slotBase(slot)}sx`], [k.slotBase(slot), now, SWEEP_BATCH])) as [number, number, number, ...string[]];
      await unref(mks); // Redis expires them by itself too, at the same time as their rows
      // (a failure leaves them for the next sweep; it does not stop this one)
      if (outbox > 0 && round === 0) await drainOutbox(slot).catch(() => undefined);
      removed += n;
      if (left === 0) await client.srem(k.slotsInUse, slot);
      if (n < SWEEP_BATCH) break;
    }
    return removed;
  }

  return {
    capabilities: { sharedAcrossProcesses: true, orderedAcrossInboxes: !cluster },
    webhooks,
    domains: createRedisDomains(client, k.domains, replicas),
    faults: createRedisFaults(client, k),
    ...createRedisKeys(client, k, replicas), // the key seam (keys.ts): one object implements every seam
    addEmails: (emails, events) => call(() => addEmails(emails, events)),
    listEmails: (address, query, now) => call(() => listEmails(address, query, now)),
    hasEmails: (address, now) => call(async () => (await listEmails(address, { limit: 1 }, now)).length > 0),
    getEmail: (id, now) =>
      call(async (): Promise<StoredEmail | null> => {
        const lid = id.toLowerCase();
        const [x, s, m] = await client.hmget(k.email(lid), 'x', 's', 'm');
        if (x === null || s === null || m === null || Number(x) <= now) return null;
        return { id: lid, ...(JSON.parse(s) as StoredSummary), messageKey: m };
      }),
    readRaw: (mk) => call(() => bytes(`${k.message(mk)}:r`)),
    getViews: (mk) => call(() => client.hget(k.message(mk), 'v')),
    getAuthentication: (mk) =>
      call(async (): Promise<StoredAuthentication | null> => {
        const [x, ae, av] = await client.hmget(k.message(mk), 'x', 'ae', 'av');
        return x ? { envelope: parseEnvelope(ae), verdicts: av ?? null } : null;
      }),
    putAuthentication: (mk, verdicts) => call(async () => void (await run.putAuth([k.message(mk)], [verdicts]))),
    putViews: (mk, views, parts) =>
      call(async () => {
        const base = k.message(mk);
        await run.putViews([base], [base, views, ...parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength))]);
      }),
    readPart: (mk, index) => call(() => bytes(`${k.message(mk)}:p:${index}`)),
    matchText: (ids, needle, now) => call(() => matchText(ids, needle, now)),
    putSearchText: (mk, text) => call(async () => void (await run.putSearch([k.message(mk)], [text]))),
    deleteEmail: (id, now) =>
      call(async () => {
        const lid = id.toLowerCase();
        const [removed, mk] = (await run.del([k.email(lid)], [k.slotBase(idSlot(lid)), lid, now])) as [number, string?];
        if (removed === 1 && mk) await unref([mk]);
        return removed === 1;
      }),
    purgeInbox: (address, now) =>
      call(async () => {
        const [live, ...mks] = (await run.purge([k.index(address)], [k.slotBase(addressSlot(address)), address, now])) as [number, ...string[]];
        await unref(mks);
        return live;
      }),
    sweepExpired: (now) =>
      call(async () => {
        slotsSeen.clear();
        const slots = (await client.smembers(k.slotsInUse)).map(Number);
        let removed = 0;
        for (let i = 0; i < slots.length; i += SWEEP_PARALLEL) {
          const counts = await Promise.all(slots.slice(i, i + SWEEP_PARALLEL).map((s) => sweepSlot(s, now)));
          removed += counts.reduce((a, b) => a + b, 0);
        }
        await webhooks.sweepExpired(now); // expired webhook events, with the bodies they alone used
        return removed;
      }),
    /** Bounded at 2 s: a Redis that hangs (paused, overloaded) reads as down to the health check. */
    ping: () =>
      call(async () => {
        let timer: NodeJS.Timeout | undefined;
        const slow = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new StoreUnavailableError('Redis did not answer PING within 2 s')), PING_TIMEOUT_MS);
        });
        try {
          await Promise.race([client.ping(), slow]);
        } finally {
          clearTimeout(timer);
        }
      }),
    async close() {
      if (options.ownsClient === false) return;
      await closeClient(client);
    },
  };
}

