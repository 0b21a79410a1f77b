// Body search (`text=`), in this process: what one request costs and how long it holds the event
// loop at once, as ratios to two references measured in the same run, interleaved: a `from=` filter
// over the same emails (the summary-only scan every filtered read does), and what `text=` did before
// search texts once every body was derived: each email's stored views read and parsed, then searched.
//
//   node --import tsx bench/search.ts [--runs=3] [--quick] [--store redis]
//
// An inbox of 200 emails of 64 KB of words each (search texts at their 32,768-character cap), a
// needle found in none: every request reads all 200 search texts (TEXT_SCAN_MAX).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assemble, type Service } from '../src/assemble.ts';
import { loadConfig } from '../src/config.ts';
import { listEmails } from '../src/services/emails.ts';
import { summarize } from '../src/derive/summary.ts';
import { searchTextOfRaw } from '../src/derive/search-text.ts';
import { deleteRedisKeys, fmt, machineLine, parseArgs, spread } from './lib.ts';

const opts = parseArgs(process.argv.slice(2));
const EMAILS = opts.quick ? 20 : 200;
const REQUESTS = opts.quick ? 5 : 40;
const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };

function words(bytes: number, seed: number): string {
  const vocab = ['lorem', 'ipsum', 'dolor', 'sit', 'amet', 'consectetur', 'adipiscing', 'elit', 'sed', 'eiusmod', 'tempor', 'incididunt'];
  let x = seed + 1;
  const out: string[] = [];
  for (let n = 0; n < bytes;) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const w = vocab[x % vocab.length];
    out.push(w);
    n += w.length + 1;
  }
  return out.join(' ').replace(/(.{72}) /g, '$1\r\n');
}

async function open(): Promise<{ service: Service; done(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-bench-search-'));
  const prefix = `ephbench:search:${randomUUID().slice(0, 8)}:`;
  const store = opts.store === 'redis' ? `${opts.redisUrl}?prefix=${prefix}` : `sqlite:${join(dir, 'search.db')}`;
  const service = await assemble(loadConfig({ EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_STORE: store, EPHEMAIL_LOG_LEVEL: 'silent', EPHEMAIL_DNS_SERVERS: '127.0.0.1:1' }), { mounts: [] });
  return {
    service,
    async done() {
      await service.stop();
      if (opts.store === 'redis') await deleteRedisKeys(opts.redisUrl!, prefix);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Times `n` calls of `fn`, one after another with a turn of the event loop between: ms per call, and
 * the longest stretch without a turn of the event loop (a setImmediate chain notes each turn).
 */
async function measure(n: number, fn: () => Promise<unknown>): Promise<{ perCall: number; worstBlock: number }> {
  let on = true;
  let last = performance.now();
  let worst = 0;
  const tick = () => {
    const t = performance.now();
    worst = Math.max(worst, t - last);
    last = t;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  let busy = 0;
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setImmediate(r));
    const t0 = performance.now();
    await fn();
    busy += performance.now() - t0;
  }
  on = false;
  return { perCall: busy / n, worstBlock: worst };
}

console.log(`bench/search.ts · ${opts.store ?? 'sqlite'} · ${EMAILS} emails of 64 KB · ${machineLine()}`);
const { service, done } = await open();
const { core } = service;
try {
  const address = `search-${randomUUID().slice(0, 8)}@ephemail.test`;
  const now = Date.now();
  for (let i = 0; i < EMAILS; i++) {
    const raw = new Uint8Array(Buffer.from(`From: news${i}@example.org\r\nSubject: issue ${i}\r\nContent-Type: text/plain\r\n\r\n${words(64 * 1024, i)}\r\n`));
    const s = await summarize(raw, LIMITS);
    await core.store.addEmails([{ address, sender: s.sender, subject: s.subject, hasAttachments: false, mailedBy: null, receivedAt: now, expiresAt: now + 3_600_000, raw: s.raw, searchText: await searchTextOfRaw(s.raw) }]);
  }
  const keys: string[] = [];
  for (let before: string | undefined; keys.length < EMAILS;) {
    const page = await core.store.listEmails(address, { limit: 100, before }, now);
    for (const e of page) keys.push((await core.store.getEmail(e.id, now))!.messageKey);
    before = page.at(-1)?.id;
  }
  for (const k of keys) await core.views.get(k); // every body derived and kept (the old path's best case)
  for (const k of keys) await core.views.stored(k);
  const text = () => listEmails(core, { address, limit: 100, text: 'absent needle' });
  const from = () => listEmails(core, { address, limit: 100, from: 'absent sender' });
  // the old body read, without the views cache (over 2 M characters, or evicted): read, parse, search
  const views = async () => {
    for (const k of keys) {
      const v = JSON.parse((await core.store.getViews(k))!) as { textBody: string | null; agentBody: { body: string } };
      (v.textBody ?? v.agentBody.body).toLowerCase().includes('absent needle');
    }
  };
  type Name = 'text' | 'from' | 'views';
  const fns: [Name, () => Promise<unknown>][] = [['text', text], ['from', from], ['views', views]];
  const rows = Object.fromEntries(fns.map(([n]) => [n, { perCall: [] as number[], worstBlock: [] as number[] }])) as Record<Name, { perCall: number[]; worstBlock: number[] }>;
  for (const [, fn] of fns) await measure(3, fn);
  for (let run = 0; run < opts.runs; run++) {
    // interleaved, in a rotating order: the machine's drift falls on all three
    for (let i = 0; i < fns.length; i++) {
      const [name, fn] = fns[(i + run) % fns.length];
      const m = await measure(REQUESTS, fn);
      rows[name].perCall.push(m.perCall);
      rows[name].worstBlock.push(m.worstBlock);
    }
  }
  const line = (label: string, n: Name) => console.log(`  ${label}: ${fmt(spread(rows[n].perCall), 2, ' ms')} per request, longest stretch without a turn of the event loop ${fmt(spread(rows[n].worstBlock), 1, ' ms')}`);
  line(`text= (reads ${keys.length} search texts)`, 'text');
  line('from= (reference: the summary scan)', 'from');
  line(`views (reference: the old body read of ${keys.length} emails, uncached)`, 'views');
  const ratio = (a: Name, b: Name) => fmt(spread(rows[a].perCall.map((t, i) => t / rows[b].perCall[i])), 2, '×');
  console.log(`  text / from: ${ratio('text', 'from')} · text / views: ${ratio('text', 'views')}`);
} finally {
  await done();
}
