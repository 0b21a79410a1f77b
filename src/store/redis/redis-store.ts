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
import { createRedisFaults } from './faults.ts';
import { createRedisKeys } from './keys.ts';

const CHUNK = 256 * 1024;
const SWEEP_BATCH = 500;
const SWEEP_PARALLEL = 16;
const PING_TIMEOUT_MS = 2000;



type StoredSummary = Omit<EmailSummary, 'id'>;

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
  /** Slots this node already recorded in `slotsInUse` since its last sweep. */
  const slotsSeen = new Set<number>();

  async function addGroup(slot: number | null, emails: NewEmail[], keyOf: Map<Uint8Array, string>): Promise<string[]> {
    const args: Arg[] = [emails.length];
    for (const e of emails) {
      const s = addressSlot(e.address);
      const { id: _none, ...summary }: EmailSummary = summaryOf('', e);
      args.push(k.slotBase(s), e.address, s * 2 ** 18 + randomInt(2 ** 18), randomInt(2 ** 30), e.expiresAt, JSON.stringify(summary), keyOf.get(e.raw)!);
    }
    return (await run.add([k.sequence(slot)], args)) as string[];
  }

  async function addEmails(emails: NewEmail[]): Promise<StoredEmail[]> {
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
    if (!cluster) {
      (await addGroup(null, emails, keyOf)).forEach((id, i) => (ids[i] = id));
    } else {
      // one script per slot: the inbox is the unit of atomicity and order on Cluster
      const groups = new Map<number, number[]>();
      emails.forEach((e, i) => {
        const s = addressSlot(e.address);
        groups.set(s, [...(groups.get(s) ?? []), i]);
      });
      await Promise.all([...groups].map(async ([s, idx]) => (await addGroup(s, idx.map((i) => emails[i]), keyOf)).forEach((id, j) => (ids[idx[j]] = id))));
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
      const [n, left, ...mks] = (await run.sweep([`${k.slotBase(slot)}sx`], [k.slotBase(slot), now, SWEEP_BATCH])) as [number, number, ...string[]];
      await unref(mks); // Redis expires them by itself too, at the same time as their rows
      removed += n;
      if (left === 0) await client.srem(k.slotsInUse, slot);
      if (n < SWEEP_BATCH) break;
    }
    return removed;
  }

  const webhooks = createRedisWebhooks(client, k.prefix, replicas);

  return {
    capabilities: { sharedAcrossProcesses: true, orderedAcrossInboxes: !cluster },
    webhooks,
    domains: createRedisDomains(client, k.domains, replicas),
    faults: createRedisFaults(client, k),
    ...createRedisKeys(client, k, replicas), // the key seam (keys.ts): one object implements every seam
    addEmails: (emails) => call(() => addEmails(emails)),
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

