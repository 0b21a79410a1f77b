// Spam score (issue 25 item 2, docs/sender-checks.md): `spam` of the full email from a REAL spamd
// (Debian's spamassassin, started here on loopback, local tests only), and what a reader sees when
// spamd is down, slow or not configured. Without spamd the real-spamd tests are skipped with the
// reason, said loudly; under CI=true that is a failure.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { checkSpam, parseReply } from '../../src/derive/spamd.ts';
import { captureLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { FAKE_REPORT as REPORT, fakeSpamd, spamdMissing, startSpamd, type Spamd } from '../helpers/spamd.ts';
import { freePort } from '../helpers/serve.ts';

const ci = process.env.CI === 'true' || process.env.CI === '1';
if (spamdMissing) console.error(`\n# REAL SPAMD TESTS ${ci ? 'CANNOT RUN' : 'SKIPPED'}: ${spamdMissing}\n`);

const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';

interface WireSpam {
  score?: number; threshold?: number; is_spam?: boolean; rules?: { name: string; score: number; description: string }[]; truncated?: boolean; error?: string;
}

async function spamOf(svc: TestService, address: string): Promise<WireSpam | null> {
  const res = await svc.api(`/api/v1/inboxes/${address}/latest`);
  assert.equal(res.status, 200, 'a read never fails for the spam score');
  const { data } = (await res.json()) as { data: { id: string; spam: WireSpam | null } };
  const { data: again } = (await (await svc.api(`/api/v1/emails/${data.id}`)).json()) as { data: { spam: WireSpam | null } };
  assert.deepEqual(again.spam, data.spam, 'GET /emails/{id} and latest agree');
  return data.spam;
}

describe('spam with a real spamd', { skip: spamdMissing && !ci ? spamdMissing : false }, () => {
  let spamd: Spamd;
  let svc: TestService;
  before(async () => {
    assert.equal(spamdMissing, '', `CI=true: ${spamdMissing}`);
    spamd = await startSpamd();
    svc = await startService({ EPHEMAIL_SPAMD: `127.0.0.1:${spamd.port}` });
  }, { timeout: 180_000 });
  after(async () => {
    await svc?.stop();
    await spamd?.stop();
  });

  test('the GTUBE test message is spam, with the GTUBE rule named and described', async () => {
    const to = 'gtube@ephemail.test';
    await svc.send({ to, subject: 'Test', text: `This is the GTUBE, the\n\n${GTUBE}\n\nGeneric Test for Unsolicited Bulk Email\n` });
    const spam = await spamOf(svc, to);
    assert.ok(spam && !('error' in spam), `a score (got ${JSON.stringify(spam)})`);
    assert.equal(spam.is_spam, true);
    assert.ok(spam.score! >= 1000, `GTUBE scores 1000 (got ${spam.score})`);
    assert.equal(spam.threshold, 5);
    const gtube = spam.rules!.find((r) => r.name === 'GTUBE');
    assert.deepEqual(gtube && { score: gtube.score, described: /Unsolicited Bulk Email/.test(gtube.description) }, { score: 1000, described: true });
    assert.equal(spam.truncated, false);
    const id = ((await (await svc.api(`/api/v1/inboxes/${to}/latest`)).json()) as { data: { id: string } }).data.id;
    const page = await (await svc.api(`/inbox/${to}/${id}`)).text();
    assert.match(page, /<p class="spam-verdict"><strong>[\d.]+<\/strong> of 5\.0: SpamAssassin would call this spam/);
    assert.match(page, /<code>GTUBE<\/code>/);
  });

  test('a plain message is not spam', async () => {
    const to = 'plain-spam@ephemail.test';
    await svc.send({ to, subject: 'Your order has shipped', text: 'Hello Ana,\n\nyour order 1234 left our warehouse today. It should arrive on Friday.\n\nThanks,\nThe shop\n' });
    const spam = await spamOf(svc, to);
    assert.ok(spam && !('error' in spam), `a score (got ${JSON.stringify(spam)})`);
    assert.equal(spam.is_spam, false);
    assert.ok(spam.score! < spam.threshold!, `below the threshold (got ${spam.score})`);
    assert.ok(spam.rules!.every((r) => r.name !== 'GTUBE'));
  });
});



describe('spam without a real spamd', () => {
  test('REPORT is parsed: verdict, threshold, rules with wrapped descriptions; the sender\'s preview never adds a rule', () => {
    assert.deepEqual(parseReply(REPORT, false), {
      score: 2.3, threshold: 5, isSpam: false, truncated: false,
      rules: [
        { name: 'MISSING_DATE', score: 2.7, description: 'Missing Date: header' },
        { name: 'SOME_LONG_RULE', score: -0.4, description: 'A description that goes on and on and wraps onto the next line' },
      ],
    });
    assert.deepEqual(parseReply('SPAMD/1.0 76 Bad header line: x\r\n\r\n', false), { error: 'spamd error: SPAMD/1.0 76 Bad header line: x' });
  });

  test('not configured: spam is null', async () => {
    const svc = await startService();
    try {
      await svc.send({ to: 'nospamd@ephemail.test', subject: 'x', text: 'x' });
      assert.equal(await spamOf(svc, 'nospamd@ephemail.test'), null);
    } finally {
      await svc.stop();
    }
  });

  test('spamd down: the read answers at once with spam.error, and a log line says why', async () => {
    const captured = captureLog('info');
    const port = await freePort(); // nothing listens there
    const svc = await startService({ EPHEMAIL_SPAMD: `127.0.0.1:${port}` }, { log: captured.log });
    try {
      await svc.send({ to: 'down@ephemail.test', subject: 'x', text: 'x' });
      const started = performance.now();
      assert.deepEqual(await spamOf(svc, 'down@ephemail.test'), { error: 'spamd unreachable' });
      // bound: a refused connection fails at once, not after a timeout; one-sided, generous
      assert.ok(performance.now() - started < 8000, 'a refused connection does not hold the read');
      const line = captured.find('spam score could not be made')[0];
      assert.equal(line?.error, 'spamd unreachable');
      assert.equal(line?.spamd, `127.0.0.1:${port}`);
    } finally {
      await svc.stop();
    }
  });

  test('computed once and kept: later reads do not ask spamd again', async () => {
    const fake = await fakeSpamd(REPORT);
    const svc = await startService({ EPHEMAIL_SPAMD: `127.0.0.1:${fake.port}` });
    try {
      await svc.send({ to: 'kept@ephemail.test', subject: 'x', text: 'x' });
      const first = await spamOf(svc, 'kept@ephemail.test');
      assert.equal(first?.score, 2.3);
      await spamOf(svc, 'kept@ephemail.test');
      assert.equal(fake.connections, 1);
    } finally {
      await svc.stop();
      fake.server.close();
    }
  });

  test('a spamd that accepts and never answers: spamd timed out within the budget', async () => {
    const fake = await fakeSpamd(null);
    try {
      const started = performance.now();
      assert.deepEqual(await checkSpam({ host: '127.0.0.1', port: fake.port }, new TextEncoder().encode('Subject: x\r\n\r\nx\r\n'), 300), { error: 'spamd timed out' });
      // bound: the 300 ms budget is kept (it is the behaviour); one-sided, generous for a loaded machine
      assert.ok(performance.now() - started < 5000);
    } finally {
      fake.server.close();
    }
  });

  test('a message over 512 KiB is cut at a line end and says so', async () => {
    let received = 0;
    const server = createServer((s) => {
      s.on('data', (d) => (received += d.length));
      s.on('end', () => s.end(REPORT));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const big = new TextEncoder().encode(`Subject: big\r\n\r\n${'0123456789abcdef\r\n'.repeat(60_000)}`);
      const v = await checkSpam({ host: '127.0.0.1', port: (server.address() as { port: number }).port }, big, 5000);
      assert.equal('error' in v ? v.error : v.truncated, true);
      assert.ok(received <= 512 * 1024 + 100, `sent ${received} bytes`);
    } finally {
      server.close();
    }
  });
});
