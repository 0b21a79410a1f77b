// Mail and its webhook events are one write (issue 35 finding 11): with the queue's write failing (a
// real store with a fault: a SQLite trigger that aborts the job's insert; on Redis the webhook's
// pending set made a string, so the queue's script fails with WRONGTYPE), either the mail and its
// event are both stored (250, the event delivered once the fault is gone) or neither (451, nothing
// stored): the sender's retry never makes a second copy, and no event is lost or sent twice.
// Over real SMTP on SQLite, single Redis and a 3-master Redis Cluster.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import type { Redis } from 'ioredis';
import { closeClient, connect, parseRedisUrl, whenReady, type RedisClient } from '../../src/redis/client.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { SKIP_REDIS, SKIP_SERVER, dropPrefix, startCluster, testStoreUrl, type RedisCluster } from '../redis/servers.ts';

const json = { 'content-type': 'application/json' };

interface Fault {
  /** Makes the webhook queue's write fail for this webhook. */
  on(webhookId: string): Promise<void>;
  off(webhookId: string): Promise<void>;
}

/** One backend: the service's env and the fault it can inject. */
interface Backend {
  env(): Record<string, string>;
  fault(svc: TestService): Fault;
  done?(): Promise<void>;
}

function atomicity(name: string, skip: string | false, backend: () => Backend): void {
  describe(`mail and its webhook events are one write: ${name}`, { skip }, () => {
    let svc: TestService;
    let rx: Receiver;
    let b: Backend;
    before(async () => {
      b = backend();
      rx = await startReceiver(() => 204);
      // the sweep every 200 ms: on Redis it queues the events a failed move left with the mail
      svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', ...b.env() }, { sweepIntervalMs: 200 });
    });
    after(async () => {
      await svc?.stop();
      await rx?.close();
      await b?.done?.();
    });

    test('the queue\'s write fails: 250 with the mail and its event, or 451 with neither; the retry stores one copy; one event', async () => {
      const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
      const address = `atomic-${randomUUID().slice(0, 8)}@ephemail.test`;
      const res = await svc.api('/api/v1/webhooks', { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: JSON.stringify({ url: rx.url, address }) });
      assert.equal(res.status, 201);
      const hook = (await res.json()).data;
      const stored = () => svc.service.core.store.listEmails(address, { limit: 10 }, Date.now());
      const send = async () => (await sendRaw(svc.smtpPort, { from: 'a@sender.example', to: [address], body: message({ From: 'a@sender.example', Subject: 'Your code' }, 'Your code is 482913') })).data?.code;
      const fault = b.fault(svc);

      await fault.on(hook.id);
      const first = await send();
      assert.ok(first === 250 || first === 451, `a 250 or a 451 (got ${first})`);
      if (first === 451) assert.deepEqual(await stored(), [], 'a 451 stores nothing: the retry makes no second copy');
      else assert.equal((await stored()).length, 1, 'a 250 stored the mail');
      await fault.off(hook.id);
      // the sender retries what was refused
      if (first === 451) assert.equal(await send(), 250);

      const emails = await stored();
      assert.equal(emails.length, 1, 'one copy of the mail');
      const [call] = await rx.until(1, 15_000);
      assert.equal(JSON.parse(call.body).data.id, emails[0].id, 'its event names it');
      // unobservable: a second event for the same mail would come within the next sweeps (200 ms apart)
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(rx.calls.length, 1, 'one event, never a second');
      assert.equal((await stored()).length, 1);
    });
  });
}

atomicity('sqlite', false, () => ({
  env: () => ({}),
  fault: (svc) => {
    const path = svc.service.core.config.store.replace(/^sqlite:/, '');
    const fail = (sql: string) => {
      const db = new Database(path);
      try {
        db.exec(sql);
      } finally {
        db.close();
      }
    };
    return {
      on: async () => fail(`CREATE TRIGGER injected_fault BEFORE INSERT ON webhook_jobs BEGIN SELECT RAISE(ABORT, 'injected: the queue write fails'); END`),
      off: async () => fail('DROP TRIGGER injected_fault'),
    };
  },
}));

/** The fault on Redis: the webhook's pending set (`{wh}:hj:<id>`) made a string, so the queue's script fails. */
function redisBackend(url: () => string, done?: () => Promise<void>): () => Backend {
  return () => {
    const prefix = `ephtest:${randomUUID().slice(0, 8)}:`;
    let client: RedisClient | null = null;
    const open = async () => {
      if (client) return client;
      const c = connect(parseRedisUrl(url()));
      c.on('error', () => undefined);
      await whenReady(c, 10_000);
      return (client = c);
    };
    const storeUrl = () => {
      const u = url();
      return `${u}${u.includes('?') ? '&' : '?'}prefix=${prefix}`;
    };
    return {
      env: () => ({ EPHEMAIL_STORE: url().startsWith('redis+cluster') ? storeUrl() : testStoreUrl(prefix) }),
      fault: () => ({
        on: async (id) => void (await (await open()).set(`${prefix}{wh}:hj:${id}`, 'injected: not a set')),
        off: async (id) => void (await (await open()).del(`${prefix}{wh}:hj:${id}`)),
      }),
      async done() {
        const c = await open();
        await dropPrefix(c as Redis, prefix);
        await closeClient(c);
        await done?.();
      },
    };
  };
}

atomicity('redis', SKIP_REDIS, redisBackend(() => process.env.EPHEMAIL_TEST_REDIS_URL ?? ''));

let cluster: RedisCluster | null = null;
describe('on a Redis Cluster', { skip: SKIP_SERVER }, () => {
  before(async () => {
    cluster = await startCluster(3);
  });
  atomicity('redis cluster (3 masters)', false, redisBackend(() => cluster!.url, async () => void (await cluster?.stop())));
});
