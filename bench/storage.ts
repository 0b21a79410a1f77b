// Storing once, measured: one 30 MiB message (several
// attachments, each under 5 MB decoded) sent to 100 recipients in one transaction — how much the
// SQLite store (file + WAL) and the service's RSS grow; then the same with a part over 5 MB (cut out);
// and the first read of never-read 50 KB newsletters (the views are derived on that read): p50/p99.
//
//   node --import tsx bench/storage.ts [--quick]
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { machineLine, parseArgs, percentile, rssOf, startService } from './lib.ts';
import { htmlMessage } from './smtp-load.ts';

const MiB = 1024 * 1024;
const size = (p: string) => {
  try {
    return statSync(p).size;
  } catch {
    return 0;
  }
};

/** A multipart/mixed message of about `mib` MiB: attachments of `each` bytes (decoded), base64. */
function bigMessage(mib: number, each: number, oversized = 0): Buffer {
  const parts: string[] = [];
  let total = 0;
  let i = 0;
  const add = (bytes: number) => {
    const b64 = randomBytes(bytes).toString('base64').replace(/.{76}/g, '$&\r\n');
    parts.push(`--B\r\nContent-Type: application/pdf; name="part${i}.pdf"\r\nContent-Disposition: attachment; filename="part${i}.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\n${b64}\r\n`);
    total += b64.length;
    i++;
  };
  if (oversized) add(oversized);
  while (total < mib * MiB * 0.97) add(Math.min(each, Math.floor(((mib * MiB * 0.97 - total) * 3) / 4) + 1));
  return Buffer.from(`From: big@bench.example\r\nTo: many@ephemail.test\r\nSubject: 30 MiB for 100\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="B"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n${parts.join('')}--B--\r\n`);
}

/** One SMTP transaction to many recipients (pipelined RCPTs); resolves with the final reply. */
function sendTo(port: number, recipients: string[], message: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    let stage = 0;
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const lines = buf.split('\r\n');
      buf = lines.pop()!;
      for (const line of lines) {
        if (/^\d{3}-/.test(line)) continue;
        stage++;
        if (stage === 1) s.write('EHLO bench.example\r\n');
        else if (stage === 2) s.write(`MAIL FROM:<big@bench.example> SIZE=${message.length}\r\n${recipients.map((r) => `RCPT TO:<${r}>\r\n`).join('')}DATA\r\n`);
        else if (stage === 4 + recipients.length) {
          if (!line.startsWith('354')) return reject(new Error(line));
          s.write(Buffer.concat([Buffer.from(message.toString('latin1').replace(/^\./gm, '..'), 'latin1'), Buffer.from('.\r\n')]));
        } else if (stage === 5 + recipients.length) {
          s.end('QUIT\r\n');
          resolve(line);
        }
      }
    });
    s.on('error', reject);
  });
}

export async function benchStorage(opts: { quick: boolean }, log: (s: string) => void = console.log): Promise<void> {
  const recipients = Array.from({ length: opts.quick ? 10 : 100 }, (_, i) => `many${i}@ephemail.test`);
  for (const [label, message] of [
    ['30 MiB, 7 attachments of 4.5 MB', bigMessage(opts.quick ? 3 : 30, 4_500_000)],
    ['30 MiB with one 6 MB part (cut out)', bigMessage(opts.quick ? 8 : 30, 4_500_000, 6 * MiB)],
  ] as const) {
    const svc = await startService({ EPHEMAIL_MAX_MESSAGE_BYTES: String(40 * MiB) });
    try {
      const db = join(svc.dir, 'bench.db');
      const before = size(db) + size(`${db}-wal`);
      const rssBefore = rssOf(svc.pid).rssMb;
      const t0 = performance.now();
      const reply = await sendTo(svc.smtpPort, recipients, message);
      const ms = performance.now() - t0;
      const grown = size(db) + size(`${db}-wal`) - before;
      const rss = rssOf(svc.pid);
      log(`  ${label.padEnd(38)} to ${recipients.length}: ${reply.slice(0, 3)} in ${(ms / 1000).toFixed(1)} s; store +${(grown / MiB).toFixed(1)} MiB = ${(grown / message.length).toFixed(2)}× the ${(message.length / MiB).toFixed(1)} MiB message; RSS +${(rss.peakMb - rssBefore).toFixed(0)} MB (peak ${rss.peakMb.toFixed(0)} MB)`);
    } finally {
      await svc.stop();
    }
  }

  // first reads: each 50 KB newsletter read once, so every read derives its views
  const svc = await startService();
  try {
    const n = opts.quick ? 20 : 300;
    const msg = htmlMessage(50).wire.toString('latin1').replace(/\r\n\.\r\n$/, '\r\n').replace(/^\.\./gm, '.');
    for (let i = 0; i < n; i++) await sendTo(svc.smtpPort, [`read${i}@ephemail.test`], Buffer.from(msg, 'latin1'));
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const [e] = (await (await fetch(`${svc.http}/api/v1/inboxes/read${i}@ephemail.test/emails`)).json()).data;
      const t0 = performance.now();
      const res = await fetch(`${svc.http}/api/v1/emails/${e.id}`);
      await res.arrayBuffer();
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const again: number[] = [];
    for (let i = 0; i < Math.min(n, 100); i++) {
      const [e] = (await (await fetch(`${svc.http}/api/v1/inboxes/read${i}@ephemail.test/emails`)).json()).data;
      const t0 = performance.now();
      await (await fetch(`${svc.http}/api/v1/emails/${e.id}`)).arrayBuffer();
      again.push(performance.now() - t0);
    }
    again.sort((a, b) => a - b);
    log(`  first read of a 50 KB newsletter (views derived then): p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms over ${n}; a second read: p50 ${percentile(again, 50).toFixed(1)} ms, p99 ${percentile(again, 99).toFixed(1)} ms`);
  } finally {
    await svc.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# Storage and first reads — ${new Date().toISOString()} — ${machineLine()}`);
  await benchStorage({ quick: opts.quick });
}
