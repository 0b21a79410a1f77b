// Benchmark 5: push. Real mail (the realistic 5 KB multipart/alternative message) paced at a fixed
// rate over several SMTP connections to one service; a webhook on the whole domain delivers every
// email to a receiver in this process, and SSE streams are open on the inboxes the mail goes to.
// Prints the delay from each 250 to the webhook receipt and to the stream event (p50/p99), next to
// the same mail's 250 → long-poll wake-up (the reference: the service's own fastest push path,
// measured in the same run); then the RSS with 5,000 open streams against the same service idle.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { createKey, fmt, machineLine, parseArgs, percentile, rssOf, sleep, spread, startService, storeLabel, type BenchOptions, type Spread } from './lib.ts';
import { realisticMessage } from './messages.ts';

const STREAM_INBOXES = 50;

/** One SMTP connection sending one message at a time; resolves each send at its 250 with the time. */
async function smtpConnection(port: number): Promise<{ send(to: string, body: Buffer): Promise<number>; close(): void }> {
  const socket: Socket = connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  let buf = '';
  let waiting: ((line: string) => void)[] = [];
  const lines: string[] = []; // replies that came before anyone asked
  socket.on('data', (d) => {
    buf += d.toString('latin1');
    let i: number;
    while ((i = buf.indexOf('\r\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (/^\d{3}-/.test(line)) continue; // multi-line reply: wait for its last line
      const w = waiting.shift();
      if (w) w(line);
      else lines.push(line);
    }
  });
  const reply = () => (lines.length ? Promise.resolve(lines.shift()!) : new Promise<string>((r) => waiting.push(r)));
  await new Promise<void>((r, j) => socket.once('connect', r).once('error', j));
  await reply(); // greeting
  socket.write('EHLO bench.example\r\n');
  await reply();
  return {
    async send(to, body) {
      socket.write(`MAIL FROM:<sender@bench.example>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
      const [m, r, d] = [await reply(), await reply(), await reply()];
      if (!m.startsWith('250') || !r.startsWith('250') || !d.startsWith('354')) throw new Error(`SMTP: ${m} / ${r} / ${d}`);
      socket.write(Buffer.concat([body, Buffer.from('\r\n.\r\n')]));
      const done = await reply();
      if (!done.startsWith('250')) throw new Error(`SMTP DATA: ${done}`);
      return performance.now();
    },
    close() {
      socket.end('QUIT\r\n');
      waiting = [];
    },
  };
}

/** The realistic message with a subject that names it. */
function numbered(base: Buffer, n: number): Buffer {
  return Buffer.from(base.toString('latin1').replace(/^Subject: .*$/m, `Subject: push ${n}`).replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..'), 'latin1');
}

/** Opens an SSE stream; calls onEvent(subject, at) for each `email` event. */
function openStream(http: string, key: string, address: string, onEvent: (subject: string, at: number) => void): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = request(`${http}/api/v1/inboxes/${encodeURIComponent(address)}/events`, { headers: { authorization: `Bearer ${key}` }, agent: false });
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream ${address}: ${res.statusCode}`));
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        buf += d;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const m = /"subject":"(push \d+)"/.exec(block);
          if (m) onEvent(m[1], performance.now());
        }
      });
      res.on('error', () => undefined);
      resolve(() => req.destroy());
    });
    req.on('error', (e) => reject(e));
    req.end();
  });
}

export interface PushResult {
  rate: number;
  sent: number;
  webhookP50: Spread;
  webhookP99: Spread;
  streamP50: Spread;
  streamP99: Spread;
  waitP50: Spread;
  waitP99: Spread;
  idleRssMb: Spread;
  streamsRssMb: Spread;
  streams: number;
  missing: number;
}

async function oneRun(opts: BenchOptions, rate: number, seconds: number, openStreams: number) {
  const receiverTimes = new Map<string, number>();
  const rx = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const m = /"subject":"(push \d+)"/.exec(Buffer.concat(chunks).toString());
      if (m && !receiverTimes.has(m[1])) receiverTimes.set(m[1], at);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', () => r()));
  const svc = await startService({ EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true', EPHEMAIL_WEBHOOK_WILDCARD: 'true', EPHEMAIL_WEBHOOK_MAX_IN_FLIGHT: '128' });
  const closers: (() => void)[] = [];
  try {
    const key = await createKey(svc.http);
    const tag = Date.now().toString(36);
    const r = await fetch(`${svc.http}/api/v1/webhooks`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ url: `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`, address: '*@ephemail.test' }),
    });
    if (r.status !== 201) throw new Error(`POST /webhooks: ${r.status} ${await r.text()}`);
    const inbox = (i: number) => `push${i % STREAM_INBOXES}-${tag}@ephemail.test`;
    const streamTimes = new Map<string, number>();
    for (let i = 0; i < STREAM_INBOXES; i++) closers.push(await openStream(svc.http, key, inbox(i), (s, at) => { if (!streamTimes.has(s)) streamTimes.set(s, at); }));
    // the reference: one held wait per inbox, re-armed after each wake-up
    const waitTimes = new Map<string, number>();
    let waiting = true;
    const holdOn = async (i: number) => {
      let since = '';
      while (waiting) {
        try {
          const res = await fetch(`${svc.http}/api/v1/inboxes/${encodeURIComponent(inbox(i))}/emails?wait=5${since}`, { headers: { authorization: `Bearer ${key}` } });
          const at = performance.now();
          const body = (await res.json()) as { data: { subject: string }[]; meta: { next_since: string | null } };
          for (const e of body.data) if (!waitTimes.has(e.subject)) waitTimes.set(e.subject, at);
          if (body.meta.next_since) since = `&since=${body.meta.next_since}`;
        } catch {
          await sleep(10);
        }
      }
    };
    const holders = Array.from({ length: STREAM_INBOXES }, (_, i) => holdOn(i));
    await sleep(500);
    const base = realisticMessage();
    const total = Math.round(rate * seconds);
    const conns = await Promise.all(Array.from({ length: 10 }, () => smtpConnection(svc.smtpPort)));
    const acked = new Map<string, number>();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(conns.map(async (c) => {
      for (;;) {
        const n = next++;
        if (n >= total) return;
        const due = t0 + (n * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        acked.set(`push ${n}`, await c.send(inbox(n), numbered(base, n)));
      }
    }));
    for (const c of conns) c.close();
    const deadline = performance.now() + 15_000;
    while ((receiverTimes.size < total || streamTimes.size < total) && performance.now() < deadline) await sleep(50);
    waiting = false;
    const delays = (times: Map<string, number>) => [...acked].filter(([s]) => times.has(s)).map(([s, at]) => Math.max(0, times.get(s)! - at)).sort((a, b) => a - b);
    const wh = delays(receiverTimes);
    const st = delays(streamTimes);
    const wt = delays(waitTimes);
    for (const c of closers.splice(0)) c();
    await Promise.race([Promise.all(holders), sleep(6000)]);

    // RSS: idle, then with `openStreams` streams held
    await sleep(1000);
    const idle = rssOf(svc.pid).rssMb;
    for (let i = 0; i < openStreams; i += 200) {
      const batch = await Promise.all(Array.from({ length: Math.min(200, openStreams - i) }, (_, j) => openStream(svc.http, key, `rss${i + j}-${tag}@ephemail.test`, () => undefined)));
      closers.push(...batch);
    }
    await sleep(1500);
    const held = rssOf(svc.pid).rssMb;
    return {
      sent: total,
      missing: total - Math.min(wh.length, st.length),
      webhook: [percentile(wh, 50), percentile(wh, 99)],
      stream: [percentile(st, 50), percentile(st, 99)],
      wait: [percentile(wt, 50), percentile(wt, 99)],
      idle,
      held,
    };
  } finally {
    for (const c of closers) c();
    await svc.stop();
    rx.closeAllConnections();
    rx.close();
  }
}

export async function benchPush(opts: BenchOptions): Promise<PushResult> {
  const rate = opts.quick ? 50 : 500;
  const seconds = opts.quick ? 1 : 10;
  const streams = opts.quick ? 100 : 5000;
  const runs = [];
  for (let i = 0; i < opts.runs; i++) runs.push(await oneRun(opts, rate, seconds, streams));
  const res: PushResult = {
    rate, sent: runs[0].sent, streams,
    webhookP50: spread(runs.map((r) => r.webhook[0])), webhookP99: spread(runs.map((r) => r.webhook[1])),
    streamP50: spread(runs.map((r) => r.stream[0])), streamP99: spread(runs.map((r) => r.stream[1])),
    waitP50: spread(runs.map((r) => r.wait[0])), waitP99: spread(runs.map((r) => r.wait[1])),
    idleRssMb: spread(runs.map((r) => r.idle)), streamsRssMb: spread(runs.map((r) => r.held)),
    missing: Math.max(...runs.map((r) => r.missing)),
  };
  console.log(`  ${res.sent} realistic 5 KB messages at ${rate} msgs/s over 10 SMTP connections; one webhook on *@ephemail.test; ${STREAM_INBOXES} streams and ${STREAM_INBOXES} held waits on the inboxes`);
  console.log(`  250 → webhook received:  p50 ${fmt(res.webhookP50, 1, ' ms')}  p99 ${fmt(res.webhookP99, 1, ' ms')}`);
  console.log(`  250 → stream event:      p50 ${fmt(res.streamP50, 1, ' ms')}  p99 ${fmt(res.streamP99, 1, ' ms')}`);
  console.log(`  250 → long-poll answer (reference): p50 ${fmt(res.waitP50, 1, ' ms')}  p99 ${fmt(res.waitP99, 1, ' ms')}`);
  console.log(`  ratio webhook/long-poll p50: ${(res.webhookP50.median / Math.max(0.001, res.waitP50.median)).toFixed(2)}×, stream/long-poll p50: ${(res.streamP50.median / Math.max(0.001, res.waitP50.median)).toFixed(2)}×`);
  console.log(`  RSS idle ${fmt(res.idleRssMb, 0, ' MB')} → with ${streams} open streams ${fmt(res.streamsRssMb, 0, ' MB')} (${(((res.streamsRssMb.median - res.idleRssMb.median) * 1024) / streams).toFixed(1)} KB per stream)`);
  if (res.missing > 0) console.log(`  MISSING: ${res.missing} messages without a webhook or stream event within 15 s`);
  return res;
}

if (process.argv[1] === import.meta.filename) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# push benchmark (${storeLabel(opts)}) — ${machineLine()}`);
  await benchPush(opts);
}
