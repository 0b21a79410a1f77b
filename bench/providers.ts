// Provider-API mail beside the same mail over SMTP, in one run against one `ephemail serve` process
// (issue 39): 2,000 SendGrid-shaped posts (`POST /providers/sendgrid/v3/mail/send`) of a ~5 KB
// message (text and HTML parts), then 2,000 messages of the same content over SMTP (nodemailer,
// pooled connections). Reported per phase: the service's CPU per message (user + system, all
// threads, from /proc, until the service is quiet again: what a message costs after its answer is
// charged to it), messages per second and the peak RSS.
//
//   node --import tsx bench/providers.ts [--quick]
//
// Limits are lifted (BENCH_ENV). Every message is checked as stored (the inbox counted) before the
// figures are printed.
import nodemailer from 'nodemailer';
import { cpuMsOf, cpuMsSettled, createKey, machineLine, parseArgs, rssSampler, startService } from './lib.ts';

const opts = parseArgs(process.argv.slice(2));
const MESSAGES = opts.quick ? 100 : 2000;
/** Requests (and SMTP connections) at once. */
const PARALLEL = 10;

const text = `Your verification code is 123456.\n\n${'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(40)}`;
const html = `<html><body><h1>Confirm your account</h1><p>Your verification code is <b>123456</b>.</p><p>${'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(40)}</p></body></html>`;

async function pool(count: number, parallel: number, fn: (n: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, async () => {
    while (next < count) await fn(next++);
  }));
}

const svc = await startService({ EPHEMAIL_IMAP_PORT: 'off', EPHEMAIL_POP3_PORT: 'off' });
try {
  const key = await createKey(svc.http);
  console.log(machineLine());
  console.log(`${MESSAGES} messages of ${Buffer.byteLength(text) + Buffer.byteLength(html)} bytes of text and HTML, ${PARALLEL} at once`);

  const count = async (address: string) => {
    let n = 0;
    for (let before = ''; ;) {
      const page = (await (await fetch(`${svc.http}/api/v1/inboxes/${address}/emails?limit=100${before && `&before=${before}`}`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string }[] };
      if (page.data.length === 0) return n;
      n += page.data.length;
      before = page.data.at(-1)!.id;
    }
  };
  const phase = async (name: string, address: string, send: (n: number) => Promise<void>) => {
    const rss = rssSampler(svc.pid);
    const cpu0 = cpuMsOf(svc.pid);
    const t0 = performance.now();
    await pool(MESSAGES, PARALLEL, send);
    const wall = performance.now() - t0;
    const cpu = (await cpuMsSettled(svc.pid)) - cpu0;
    const peak = rss.stop();
    const stored = await count(address);
    if (stored !== MESSAGES) throw new Error(`${name}: ${stored} of ${MESSAGES} stored`);
    console.log(`${name.padEnd(9)} ${MESSAGES} messages in ${(wall / 1000).toFixed(1)} s (${Math.round(MESSAGES / (wall / 1000))}/s): ${((cpu * 1000) / MESSAGES).toFixed(0)} µs CPU per message until quiet, peak RSS ${peak.toFixed(0)} MB; stored ${stored}`);
    return (cpu * 1000) / MESSAGES;
  };

  const sendgrid = await phase('SendGrid', 'sendgrid@ephemail.test', async (n) => {
    const res = await fetch(`${svc.http}/providers/sendgrid/v3/mail/send`, {
      method: 'POST',
      headers: { authorization: 'Bearer SG.bench', 'content-type': 'application/json' },
      body: JSON.stringify({
        personalizations: [{ to: [{ email: 'sendgrid@ephemail.test' }] }],
        from: { email: 'app@sender.example', name: 'App' },
        subject: `Message ${n}`,
        content: [{ type: 'text/plain', value: text }, { type: 'text/html', value: html }],
      }),
    });
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error(`SendGrid post ${n}: ${res.status}`);
  });

  const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: svc.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: PARALLEL, maxMessages: Infinity });
  const overSmtp = await phase('SMTP', 'smtp@ephemail.test', async (n) => {
    await smtp.sendMail({ from: 'App <app@sender.example>', to: 'smtp@ephemail.test', subject: `Message ${n}`, text, html });
  });
  smtp.close();
  console.log(`SendGrid / SMTP CPU per message: ${(sendgrid / overSmtp).toFixed(2)}`);
} finally {
  await svc.stop();
}
