// Losing a Redis master loses nothing acknowledged (docs/scaling.md "Failover"): a real Redis Cluster
// of 3 masters with one replica each, the service with EPHEMAIL_REDIS_MIN_REPLICAS=1 (every write a
// 250 depends on waits for its replica: WAIT). A master is SIGKILLed in the middle of a 300-message
// burst over 10 connections; after the failover every message that got a 250 is listed and whole,
// and the service takes mail again (to every shard: the killed machine comes back as the new
// master's replica) within 15 s of the kill.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { SKIP_SERVER, redisInfo, startCluster, type RedisCluster, type RedisProcess } from './servers.ts';

const TOTAL = 300;
const CONNECTIONS = 10;
const KILL_AFTER = 100;

let cluster: RedisCluster;
let svc: TestService;

before(async () => {
  if (SKIP_SERVER) return;
  cluster = await startCluster(3, 1);
  svc = await startService({
    EPHEMAIL_STORE: `${cluster.url}?prefix=ephfo:${randomUUID().slice(0, 6)}:`,
    EPHEMAIL_REDIS_MIN_REPLICAS: '1',
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000',
  });
});
after(async () => {
  await svc?.stop();
  await cluster?.stop();
});

/** The master processes that have a replica online, from the cluster's own view. */
function mastersWithReplica(): RedisProcess[] {
  return cluster.nodes.filter((n) => /role:master/.test(redisInfo(n.port, 'INFO', 'replication')) && /connected_slaves:[1-9]/.test(redisInfo(n.port, 'INFO', 'replication')));
}

const body = (i: number, token: string) => message({ From: 'burst@sender.example', Subject: `m${i}`, 'Message-ID': `<${token}@sender.example>` }, `${token}\r\n${'x'.repeat(2000)}\r\n`);

test('SIGKILL of a master mid-burst: every 250 is listed and whole; mail flows again within 15 s', { skip: SKIP_SERVER, timeout: 180_000 }, async (t) => {
  const victims = mastersWithReplica();
  assert.equal(victims.length, 3, 'three masters, each with its replica');
  const victim = victims[0];

  const replicaPort = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(redisInfo(victim.port, 'INFO', 'replication'))?.[1]);
  assert.ok(replicaPort > 0, 'the victim names its replica');

  const acked = new Map<number, { address: string; token: string }>();
  const refused: number[] = [];
  let killedAt = 0;
  let recovery: Promise<number> | null = null;
  // after the kill: the replica takes over; the killed machine comes back and rejoins as its replica
  // (with fewer replicas than EPHEMAIL_REDIS_MIN_REPLICAS a shard takes no mail: that is the
  // setting's promise); then mail must flow to every shard — 20 fresh addresses and message bodies
  // in a row, spread over the slots — and the time from the kill is what the test bounds
  const recover = async (): Promise<number> => {
    while (!/role:master/.test(redisInfo(replicaPort, 'INFO', 'replication'))) {
      if (Date.now() - killedAt > 15_000) return Date.now() - killedAt;
      await new Promise((r) => setTimeout(r, 100)); // poll: the replica's role, until it is master (the time from the kill is measured)
    }
    await victim.start();
    while (!/slave0:.*state=online/.test(redisInfo(replicaPort, 'INFO', 'replication')) && Date.now() - killedAt < 15_000) {
      await new Promise((r) => setTimeout(r, 100)); // poll: until the old master is an online replica
    }
    for (;;) {
      const probes = await Promise.all(Array.from({ length: 20 }, (_, i) =>
        sendRaw(svc.smtpPort, { from: 'probe@sender.example', to: [`probe${i}-${randomUUID().slice(0, 6)}@ephemail.test`], body: body(1000 + i, randomUUID()) }).catch(() => null)));
      if (probes.every((r) => r?.data?.code === 250) || Date.now() - killedAt > 15_000) return Date.now() - killedAt;
      await new Promise((r) => setTimeout(r, 100)); // poll: probe rounds until every shard takes mail
    }
  };
  let next = 0;
  const sender = async () => {
    for (;;) {
      const i = next++;
      if (i >= TOTAL) return;
      const address = `fo${i}-${randomUUID().slice(0, 6)}@ephemail.test`;
      const token = randomUUID();
      try {
        const r = await sendRaw(svc.smtpPort, { from: 'burst@sender.example', to: [address], body: body(i, token) });
        if (r.data?.code === 250) acked.set(i, { address, token });
        else refused.push(r.data?.code ?? r.rcpt[0]?.code ?? 0);
      } catch {
        refused.push(0);
      }
      if (acked.size >= KILL_AFTER && !killedAt) {
        killedAt = Date.now();
        await victim.kill();
        recovery = recover();
      }
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, sender));
  assert.ok(killedAt > 0 && recovery, 'the master was killed during the burst');
  const back = await recovery!;
  t.diagnostic(`${acked.size} of ${TOTAL} acknowledged, ${refused.length} refused (${[...new Set(refused)].join(', ')}); mail to every shard again ${back} ms after the kill`);
  assert.ok(back < 15_000, `mail is taken again within 15 s of the kill (${back} ms)`);

  // every acknowledged message is listed and whole
  const missing: string[] = [];
  for (const [i, { address, token }] of acked) {
    const list = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`);
    assert.equal(list.status, 200);
    const rows = (await list.json()).data as { id: string; subject: string }[];
    if (rows.length !== 1 || rows[0].subject !== `m${i}`) {
      missing.push(`m${i} listed ${rows.length}`);
      continue;
    }
    const raw = await svc.api(`/api/v1/emails/${rows[0].id}/raw`);
    const text = await raw.text();
    if (raw.status !== 200 || !text.includes(token) || !text.includes('x'.repeat(2000))) missing.push(`m${i} raw ${raw.status}`);
  }
  assert.deepEqual(missing, [], 'every message that got a 250 is there, whole');
  assert.ok(acked.size >= KILL_AFTER);
});
