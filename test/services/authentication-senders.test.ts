// Verdicts in flight per sender (issue 35 finding 3): a burst of mail whose SPF records make the
// most DNS lookups RFC 7208 allows (ten `mx:` terms of ten hosts each) has at most
// MAX_RUNNING_PER_SENDER verdicts computing at once per client and per envelope domain, and asks
// at most VERDICT_LOOKUPS per message in all, against a DNS server of this test that counts every
// question (TTL 0: no cache spares one).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { VERDICT_LOOKUPS } from '../../src/derive/authenticate.ts';
import type { Authentication } from '../../src/domain/authentication.ts';
import { createAuthenticationService, MAX_RUNNING_PER_SENDER } from '../../src/services/authentication.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import type { MessageEnvelope } from '../../src/store/store.ts';
import { inbox, newEmail } from '../conformance/harness.ts';
import { countingDns, type DnsRecord } from '../helpers/counting-dns.ts';

const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const BURST = 20;
const PER_MESSAGE = VERDICT_LOOKUPS.spf + VERDICT_LOOKUPS.others;

/**
 * `<tag>.evil.test` (one per message: a sender's own names defeat any cache) publishes ten `mx:`
 * terms of ten hosts each, every name under `<tag>.evil.test`: each question says whose verdict asked it.
 */
const zone = (name: string): DnsRecord[] => {
  const m = /^(?:(h\d+)\.)?(?:(m\d+)\.)?([a-z0-9-]+)\.evil\.test$/.exec(name);
  if (!m) return [];
  const [, host, mx, tag] = m;
  if (host && mx) return [{ type: 'A', address: '203.0.113.9' }];
  if (mx) return Array.from({ length: 10 }, (_, k) => ({ type: 'MX' as const, exchange: `h${k}.${mx}.${tag}.evil.test` }));
  const target = tag === 'shared' ? '%{l}' : tag;
  if (!host) return [{ type: 'TXT', data: `v=spf1 ${Array.from({ length: 10 }, (_, j) => `mx:m${j}.${target}.evil.test`).join(' ')} -all` }];
  return [];
};

/** The most verdicts that asked DNS at once: each message's span from its first question to its last. */
function mostAtOnce(log: { at: number; tag: string }[]): number {
  const spans = new Map<string, [number, number]>();
  for (const { at, tag } of log) {
    const s = spans.get(tag);
    if (!s) spans.set(tag, [at, at]);
    else s[1] = at;
  }
  const edges = [...spans.values()].flatMap(([a, b]) => [[a, 1], [b, -1]] as const).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}

async function burst(envelopeOf: (i: number) => MessageEnvelope) {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-senders-'));
  const log: { at: number; tag: string }[] = [];
  let seq = 0;
  const dns = await countingDns((name) => {
    const tag = /([a-z0-9-]+)\.evil\.test$/.exec(name)?.[1];
    if (tag && tag !== 'shared') log.push({ at: seq++, tag }); // shared.evil.test's own questions belong to every message
    return zone(name);
  });
  const store = createSqliteStore(join(dir, 'v.db'));
  const verdicts: Authentication[] = [];
  let clock = 0;
  const service = createAuthenticationService(store, LIMITS, pino({ level: 'silent' }), {
    dnsServers: [dns.server], authservId: 'ephemail.test', budgetMs: 20_000, queryTimeoutMs: 5000,
    monotonic: () => (clock += 10_000), // never busy: the burst's verdicts are not held back for ingest
    onComputed: (_s, v) => verdicts.push(v),
  });
  try {
    const mails = Array.from({ length: BURST }, (_, i) => {
      const envelope = envelopeOf(i);
      return newEmail(inbox(), { raw: Buffer.from(`From: <${envelope.mailFrom}>\r\n\r\nbody\r\n`), envelope });
    });
    const rows = await store.addEmails(mails);
    rows.forEach((r, i) => service.scheduleMessage(r.messageKey, new Uint8Array(mails[i].raw), mails[i].envelope!));
    await service.idle();
    return { questions: dns.questions.length, atOnce: mostAtOnce(log), verdicts };
  } finally {
    await service.close();
    await store.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test(`${BURST} messages from one client, each its own domain: at most ${MAX_RUNNING_PER_SENDER} verdicts at once, at most ${PER_MESSAGE} questions a message`, async () => {
  const { questions, atOnce, verdicts } = await burst((i) => ({ clientIp: '192.0.2.7', helo: 'client.test', mailFrom: `a@s${i}.evil.test` }));
  assert.equal(verdicts.length, BURST);
  assert.deepEqual([...new Set(verdicts.map((v) => v.spf.result))], ['fail'], 'the RFC\'s verdict: within its limits, no host is the client');
  assert.ok(atOnce <= MAX_RUNNING_PER_SENDER, `${atOnce} verdicts of one client asked DNS at once`);
  assert.ok(questions <= BURST * PER_MESSAGE, `${questions} questions for ${BURST} messages`);
});

test(`${BURST} messages of one envelope domain from ${BURST} clients: at most ${MAX_RUNNING_PER_SENDER} verdicts at once`, async () => {
  // shared.evil.test's terms name the sender's local part (%{l}): each message's names are its own
  const { questions, atOnce, verdicts } = await burst((i) => ({ clientIp: `192.0.2.${i + 1}`, helo: 'client.test', mailFrom: `a${i}@shared.evil.test` }));
  assert.equal(verdicts.length, BURST);
  assert.deepEqual([...new Set(verdicts.map((v) => v.spf.result))], ['fail']);
  assert.ok(atOnce <= MAX_RUNNING_PER_SENDER, `${atOnce} verdicts of one domain asked DNS at once`);
  assert.ok(questions <= BURST * PER_MESSAGE, `${questions} questions for ${BURST} messages`);
});
