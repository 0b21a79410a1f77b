// Emails with 1.9 MB of headers each, read once each (issue 34): what the service keeps of their
// answers is counted from the bytes it really holds (services/answers.ts), so 80 such reads grow the
// process's RSS by less than 64 MB; before, each read kept 1.9 MB while it was counted as ~2 KB. A
// real `ephemail serve` process (its RSS read from /proc), real SMTP and HTTP.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { metric } from '../helpers/metrics.ts';
import { procStatusBytes, spawnServe, type Served } from '../helpers/serve.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const READS = 80;
/** Reads before the measured ones: they start the derivation worker. */
const WARM = 4;
const HEADER_BYTES = 1_900_000;
const MB = 1024 * 1024;

let served: Served;
before(async () => {
  served = await spawnServe({
    EPHEMAIL_LOG_LEVEL: 'warn',
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '100000',
    EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '100000',
    EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: '100000',
  }, { ready: 'health', name: 'big-headers', tempSqlite: 'e.db' });
});
after(() => served?.stop());

/** The worker threads of a lane now (the service's `ephemail_worker_threads` gauge). */
const workers = (lane: 'summary' | 'derive' | 'verdicts') => metric(served.http, `ephemail_worker_threads{lane="${lane}"}`);
const rss = () => procStatusBytes(served.child.pid!, 'VmRSS');

/** A message whose header block is about HEADER_BYTES: many `X-Trace-N` fields, folded at 76 characters. */
function bigHeaders(n: number): string {
  const fold = `${'a'.repeat(74)}\r\n `;
  const value = fold.repeat(120); // ~9.2 KB per field
  const fields: string[] = [];
  for (let size = 0, i = 0; size < HEADER_BYTES; i++) {
    const f = `X-Trace-${i}: ${n}-${value}end`;
    fields.push(f);
    size += f.length + 2;
  }
  return `From: Sender <sender@example.org>\r\nTo: big@ephemail.test\r\nSubject: big headers ${n}\r\n${fields.join('\r\n')}\r\n\r\nbody ${n}\r\n`;
}

test(`${READS} reads of emails with 1.9 MB of headers each grow RSS by less than 64 MB`, { timeout: 300_000 }, async (t) => {
  for (let i = 0; i < READS + WARM; i++) {
    const r = await sendRaw(served.smtpPort, { from: 'sender@example.org', to: ['big@ephemail.test'], body: bigHeaders(i) });
    assert.equal(r.data?.code, 250, r.data?.text);
  }
  const ids: string[] = [];
  for (let before = ''; ;) {
    const page = await fetch(`${served.http}/api/v1/inboxes/big@ephemail.test/emails?limit=100${before && `&before=${before}`}`);
    const body = (await page.json()) as { data: { id: string }[] };
    if (body.data.length === 0) break;
    ids.push(...body.data.map((e) => e.id));
    before = body.data.at(-1)!.id;
  }
  assert.equal(ids.length, READS + WARM);
  const read = async (id: string) => {
    const res = await fetch(`${served.http}/api/v1/emails/${id}`);
    const email = (await res.json()) as { data: { headers: unknown[] } };
    assert.equal(res.status, 200);
    assert.ok(email.data.headers.length > 100, 'the headers are served');
  };
  // the lanes' threads that took the mail (summary, verdicts) stop after 10 s without work
  // (derive/pool.ts IDLE_STOP_MS; the SQLite writer's stays): the reads are measured from a quiet
  // service, not from the tail of ingest. The verdicts of these messages run after the burst, a
  // while each (beside other test files in a full run: over 30 s once)
  // (the service's gauge: Node 22 names no thread, so counting `WorkerThread`s there saw none at once)
  await until(async () => (await workers('summary')) + (await workers('verdicts')) === 0, 'the lanes of ingest stopped', 150_000, 200);
  // the first reads start the derivation workers: measured from after them
  for (const id of ids.slice(READS)) await read(id);
  assert.ok((await workers('derive')) >= 1, 'the reads started a derivation worker');
  const start = rss();
  let peak = start;
  for (const id of ids.slice(0, READS)) {
    await read(id);
    peak = Math.max(peak, rss());
  }
  t.diagnostic(`RSS ${(start / MB).toFixed(0)} MB before the reads, peak ${(peak / MB).toFixed(0)} MB: +${((peak - start) / MB).toFixed(1)} MB`);
  assert.ok(peak - start < 64 * MB, `RSS grew ${((peak - start) / MB).toFixed(1)} MB over ${READS} reads (from ${(start / MB).toFixed(0)} MB)`);
});
