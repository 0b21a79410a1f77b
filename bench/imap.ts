// IMAP reads beside the same reads over HTTP, in one run against one `ephemail serve` process
// (issue 38): 200 IMAP sessions (imapflow), each logging in to an inbox of its own, selecting INBOX
// and fetching its 50 messages whole (BODY.PEEK[]); then the same 10,000 messages read over HTTP
// (one list and 50 GET /raw per inbox). Reported per phase: the service's CPU per fetched message
// (user + system, all threads, from /proc), its peak RSS, and the wall time.
//
//   node --import tsx bench/imap.ts [--quick]
//
// The inboxes are filled over SMTP first (not measured). Limits are lifted (BENCH_ENV).
import { ImapFlow } from 'imapflow';
import nodemailer from 'nodemailer';
import { cpuMsOf, cpuMsSettled, freePort, machineLine, parseArgs, rssOf, rssSampler, startService } from './lib.ts';

const opts = parseArgs(process.argv.slice(2));
const SESSIONS = opts.quick ? 20 : 200;
const PER_INBOX = opts.quick ? 10 : 50;
/** Sessions (and HTTP readers) running at once: under the 25 connections one client may hold (IMAP caps them as SMTP does). */
const PARALLEL = 20;

async function pool<T>(items: T[], parallel: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

const imapPort = await freePort();
const svc = await startService({ EPHEMAIL_IMAP_PORT: String(imapPort), EPHEMAIL_POP3_PORT: 'off' });
try {
  const inboxes = Array.from({ length: SESSIONS }, (_, i) => `bench-${i}@ephemail.test`);
  const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: svc.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 8, maxMessages: Infinity });
  const text = 'Your code is 123456.\r\n' + 'lorem ipsum dolor sit amet '.repeat(60);
  await pool(inboxes.flatMap((to) => Array.from({ length: PER_INBOX }, (_, n) => ({ to, n }))), 32, async ({ to, n }) => {
    await smtp.sendMail({ from: 'Sender <sender@example.org>', to, subject: `Message ${n}`, text });
  });
  smtp.close();
  await cpuMsSettled(svc.pid);
  console.log(machineLine());
  console.log(`${SESSIONS} inboxes x ${PER_INBOX} messages, ${PARALLEL} readers at once`);

  const phase = async (name: string, run: () => Promise<number>) => {
    const rss = rssSampler(svc.pid);
    const cpu0 = cpuMsOf(svc.pid);
    const t0 = performance.now();
    const fetched = await run();
    const wall = performance.now() - t0;
    const cpu = (await cpuMsSettled(svc.pid)) - cpu0;
    const peak = rss.stop();
    console.log(`${name.padEnd(5)} ${fetched} messages in ${(wall / 1000).toFixed(1)} s: ${((cpu * 1000) / fetched).toFixed(0)} µs CPU per message, peak RSS ${peak.toFixed(0)} MB`);
  };

  await phase('IMAP', async () => {
    let n = 0;
    await pool(inboxes, PARALLEL, async (user) => {
      const c = new ImapFlow({ host: '127.0.0.1', port: imapPort, secure: false, auth: { user, pass: 'x' }, logger: false, disableAutoIdle: true });
      await c.connect();
      await c.mailboxOpen('INBOX');
      for await (const m of c.fetch('1:*', { source: true })) if (m.source) n++;
      await c.logout();
    });
    return n;
  });

  await phase('HTTP', async () => {
    let n = 0;
    await pool(inboxes, PARALLEL, async (address) => {
      const list = (await (await fetch(`${svc.http}/api/v1/inboxes/${address}/emails?limit=100`)).json()) as { data: { id: string }[] };
      for (const e of list.data) {
        const r = await fetch(`${svc.http}/api/v1/emails/${e.id}/raw`);
        if ((await r.arrayBuffer()).byteLength > 0) n++;
      }
    });
    return n;
  });
  console.log(`RSS now ${rssOf(svc.pid).rssMb.toFixed(0)} MB`);
} finally {
  await svc.stop();
}
