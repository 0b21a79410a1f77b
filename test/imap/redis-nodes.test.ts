// IMAP across two real `ephemail serve` nodes on the shared Redis: 1,000 messages to one address
// through both nodes (while sessions on both number them as they arrive) get UIDs strictly
// increasing in the order of their ids, identical on both nodes and after a node restarts; IDLE on
// one node is woken by SMTP mail the other node took.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { ImapFlow } from 'imapflow';
import { Redis } from 'ioredis';
import nodemailer from 'nodemailer';
import { until } from '../helpers/time.ts';
import { startNode, startNodes, type Node } from '../redis/nodes.ts';
import { SKIP_REDIS, TEST_REDIS_URL, dropPrefix, describeRedis, testStoreUrl } from '../redis/servers.ts';

const prefix = `ephtest:imap:${randomUUID().slice(0, 8)}:`;
const ADDRESS = `many-${randomUUID().slice(0, 8)}@ephemail.test`;
const COUNT = 1000;

/** The bound IMAP / POP3 port of a node, from its start line. */
const portOf = (n: Node, what: 'imap' | 'pop3') => Number(String(n.logs.find((l) => l.msg === 'ephemail started')?.[what]).split(':').pop());

const imap = (n: Node, user = ADDRESS) => new ImapFlow({ host: '127.0.0.1', port: portOf(n, 'imap'), secure: false, auth: { user, pass: 'x' }, logger: false, disableAutoIdle: true });

/** seq → UID of the whole mailbox as one node numbers it. */
async function uidsOn(n: Node): Promise<{ validity: number; uids: number[] }> {
  const c = imap(n);
  await c.connect();
  try {
    const box = await c.mailboxOpen('INBOX');
    const uids: number[] = [];
    for await (const m of c.fetch('1:*', { uid: true })) uids[m.seq - 1] = m.uid;
    return { validity: Number(box.uidValidity), uids };
  } finally {
    await c.logout();
  }
}

describeRedis('IMAP on two nodes sharing Redis', { skip: SKIP_REDIS, concurrency: 1 }, () => {
  let a: Node;
  let b: Node;
  const env = () => ({ EPHEMAIL_STORE: testStoreUrl(prefix), EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000000', EPHEMAIL_LIMIT_ANON_PER_DAY: '10000000' });

  before(async () => {
    [a, b] = await startNodes(['A', 'B'], env());
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    const redis = new Redis(TEST_REDIS_URL);
    await dropPrefix(redis as never, prefix);
    redis.disconnect();
  });

  it('IDLE on node A is woken by mail node B took: * n EXISTS within a second', async () => {
    const address = `idle-${randomUUID().slice(0, 8)}@ephemail.test`;
    const c = imap(a, address);
    await c.connect();
    try {
      await c.mailboxOpen('INBOX');
      let exists = 0;
      c.on('exists', (d: { count: number }) => (exists = d.count));
      const idling = c.idle();
      await until(() => c.idling, 'imapflow idles');
      const sent = await b.send(address, 'through B');
      assert.match(sent.response, /^250/);
      const t0 = performance.now();
      await until(() => exists === 1, 'EXISTS on A', 1000);
      assert.ok(performance.now() - t0 < 1000); // bound: the contract, EXISTS within 1 s of the 250
      await c.noop();
      await idling;
    } finally {
      await c.logout();
    }
  });

  it(`${COUNT} messages through both nodes: UIDs strictly increase with ids, the same on both nodes and after a restart`, async () => {
    const transports = [a, b].map((n) => nodemailer.createTransport({ host: '127.0.0.1', port: n.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 4, maxMessages: Infinity }));
    // sessions on both nodes number mail while it arrives
    const watchers = [imap(a), imap(b)];
    await Promise.all(watchers.map(async (w) => (await w.connect(), await w.mailboxOpen('INBOX'))));
    let sending = true;
    const polls = watchers.map(async (w) => {
      while (sending) await w.noop();
    });
    try {
      const sends: Promise<unknown>[] = [];
      for (let i = 0; i < COUNT; i++) sends.push(transports[i % 2].sendMail({ from: 'Sender <sender@example.org>', to: ADDRESS, subject: `m${i}`, text: `n ${i}` }));
      await Promise.all(sends);
    } finally {
      sending = false;
      await Promise.all(polls);
      transports.forEach((t) => t.close());
      await Promise.all(watchers.map((w) => w.logout()));
    }
    // the ids in mailbox order (POP3 UIDL is the id), oldest first as the API lists them
    const list: string[] = [];
    let since = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const page = ((await (await a.api(`/api/v1/inboxes/${ADDRESS}/emails?limit=100&since=${since}`)).json()) as { data: { id: string }[] }).data;
      list.push(...page.map((e) => e.id));
      if (page.length < 100) break;
      since = page.at(-1)!.id;
    }
    assert.equal(list.length, COUNT);
    const onA = await uidsOn(a);
    const onB = await uidsOn(b);
    assert.equal(onA.uids.length, COUNT);
    for (let i = 1; i < COUNT; i++) {
      assert.ok(list[i] > list[i - 1], 'the API lists ids increasing');
      assert.ok(onA.uids[i] > onA.uids[i - 1], `UIDs increase with ids (at ${i})`);
    }
    assert.deepEqual(onB, onA, 'the same UIDs and UIDVALIDITY on both nodes');
    // the ids in mailbox order are the API's
    const { stdout } = await import('node:child_process').then(({ execFileSync }) => ({ stdout: execFileSync('/usr/bin/python3', ['-c', `
import poplib, sys
p = poplib.POP3('127.0.0.1', int(sys.argv[1]))
p.user(sys.argv[2]); p.pass_('x')
print('\\n'.join(x.decode().split(' ')[1] for x in p.uidl()[1]))
p.quit()
`, String(portOf(b, 'pop3')), ADDRESS]).toString() }));
    assert.deepEqual(stdout.trim().split('\n'), list, 'POP3 UIDL: the ids in the order IMAP numbers them');
    // a restart keeps them
    await a.stop();
    a = await startNode('A2', env());
    assert.deepEqual(await uidsOn(a), onA, 'the same UIDs after a restart');
  });
});
