// Authentication verdicts over real sockets (issue 25 item 1): a DNS server on loopback serves SPF,
// DKIM keys and DMARC records; mail signed by nodemailer's DKIM option goes over real SMTP from
// 127.0.0.1; the full email shows the verdicts, computed within 5 s of the 250. The service is
// always pointed at the loopback DNS server (EPHEMAIL_DNS_SERVERS): nothing is asked outside.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import type { Authentication } from '../../src/domain/authentication.ts';
import { callRaw, textOf } from '../mcp/helpers.ts';
import { deadPort, startDns, type TestDns } from '../helpers/dns.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';
import { SKIP_REDIS, TEST_REDIS_URL, testStoreUrl } from '../redis/servers.ts';

const keyPair = () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    record: `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`,
  };
};
const acmeKey = keyPair();
const espKey = keyPair();

/** The zone: one domain per case, so no case reads another's cached answer. */
const ZONE = {
  txt: {
    'pass.test': ['v=spf1 ip4:127.0.0.1 -all'],
    'fail.test': ['v=spf1 ip4:192.0.2.1 -all'],
    'soft.test': ['v=spf1 ip4:192.0.2.1 ~all'],
    'acme.test': ['v=spf1 ip4:127.0.0.1 -all'],
    's1._domainkey.acme.test': [acmeKey.record],
    '_dmarc.acme.test': ['v=DMARC1; p=reject'],
    'esp.test': ['v=spf1 ip4:127.0.0.1 -all'],
    'mail._domainkey.esp.test': [espKey.record],
    '_dmarc.brand.test': ['v=DMARC1; p=reject'],
    'brand.test': ['v=spf1 -all'],
  },
  a: { 'nospf.test': ['192.0.2.9'] },
};

const BUDGET_MS = 2000;
/** The tests poll reads until the verdicts show: no request quota in the way. */
const UNLIMITED = { EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' };

async function verdictOf(svc: TestService, address: string, sentAt: number, withinMs = 5000): Promise<{ id: string; authentication: Authentication; afterMs: number }> {
  let email: { id: string; authentication: Authentication | null } | null = null;
  await until(async () => {
    const r = await svc.api(`/api/v1/inboxes/${address}/latest`);
    if (r.status !== 200) return false;
    email = ((await r.json()) as { data: typeof email }).data;
    return email?.authentication != null;
  }, `the verdicts of the mail to ${address} are shown`, withinMs);
  return { id: email!.id, authentication: email!.authentication!, afterMs: performance.now() - sentAt };
}

const signed = (domainName: string, keySelector: string, privateKey: string) => ({ domainName, keySelector, privateKey });

async function sendVia(svc: TestService, mail: SendMailOptions, dkim?: ReturnType<typeof signed>) {
  const t = nodemailer.createTransport({ host: '127.0.0.1', port: svc.smtpPort, secure: false, ignoreTLS: true, name: 'client.sender.test', ...(dkim ? { dkim } : {}) });
  try {
    const info = await t.sendMail(mail);
    assert.match(info.response, /^250 /);
    return performance.now();
  } finally {
    t.close();
  }
}

describe('authentication verdicts (SQLite)', () => {
  let dns: TestDns;
  let svc: TestService;
  before(async () => {
    dns = await startDns(ZONE);
    svc = await startService({ ...UNLIMITED, EPHEMAIL_DNS_SERVERS: dns.server }, { authentication: { budgetMs: BUDGET_MS } });
  });
  after(async () => {
    await svc?.stop();
    await dns?.close();
  });

  test('SPF pass, fail, softfail and none, each for its MAIL FROM domain, within 5 s of the 250', async () => {
    const cases = [['pass.test', 'pass'], ['fail.test', 'fail'], ['soft.test', 'softfail'], ['nospf.test', 'none']] as const;
    for (const [domain, want] of cases) {
      const to = `spf-${want}-${randomUUID().slice(0, 6)}@ephemail.test`;
      const sentAt = await sendVia(svc, { from: `app@${domain}`, to, subject: `SPF ${want}`, text: 'hello' });
      const { authentication: a, afterMs } = await verdictOf(svc, to, sentAt);
      assert.equal(a.spf.result, want, `${domain}: ${JSON.stringify(a)}`);
      assert.equal(a.spf.domain, domain);
      assert.deepEqual(a.dkim, [], 'unsigned: no signatures');
      // bound: the issue's own figure (computed within 5 s of the 250 when DNS answers); one-sided
      assert.ok(afterMs < 5000, `computed ${Math.round(afterMs)} ms after the 250`);
      assert.match(a.header, new RegExp(`^ephemail\\.test;.*spf=${want}`, 's'));
    }
  });

  test('a message signed by nodemailer: DKIM pass and aligned, DMARC pass with p=reject', async () => {
    const to = `dkim-pass-${randomUUID().slice(0, 6)}@ephemail.test`;
    const sentAt = await sendVia(svc, { from: 'App <app@acme.test>', to, subject: 'Welcome', text: 'Your code is 123456' }, signed('acme.test', 's1', acmeKey.privateKey));
    const { authentication: a } = await verdictOf(svc, to, sentAt);
    assert.deepEqual(a.spf, { result: 'pass', domain: 'acme.test' });
    assert.deepEqual(a.dkim.map(({ result, domain, selector, aligned }) => ({ result, domain, selector, aligned })), [{ result: 'pass', domain: 'acme.test', selector: 's1', aligned: true }]);
    assert.deepEqual(a.dmarc, { result: 'pass', domain: 'acme.test', policy: 'reject' });
    assert.equal(a.arc.result, 'none');
    assert.match(a.header, /dkim=pass/);
    assert.match(a.header, /dmarc=pass/);
  });

  test('a body changed after signing: DKIM is not pass (body hash did not verify); the page and read_email say so', async () => {
    const to = `dkim-altered-${randomUUID().slice(0, 6)}@ephemail.test`;
    const stream = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim: signed('acme.test', 's1', acmeKey.privateKey) });
    const info = await stream.sendMail({ from: 'app@acme.test', to, subject: 'Invoice', text: 'Amount due: 10 EUR' });
    const raw = (info.message as Buffer).toString('latin1');
    const altered = raw.replace('Amount due: 10 EUR', 'Amount due: 99 EUR');
    assert.notEqual(altered, raw);
    const sentAt = performance.now();
    const r = await sendRaw(svc.smtpPort, { from: 'app@acme.test', to: [to], body: altered });
    assert.equal(r.data?.code, 250);
    const { id, authentication: a } = await verdictOf(svc, to, sentAt);
    assert.equal(a.dkim.length, 1);
    assert.notEqual(a.dkim[0].result, 'pass');
    assert.ok(a.dkim[0].result === 'fail' || (a.dkim[0].result === 'neutral' && /body hash did not verify/.test(a.dkim[0].comment ?? '')), JSON.stringify(a.dkim));
    assert.equal(a.dmarc.result, 'pass', 'SPF still passes aligned');
    const page = await (await svc.api(`/inbox/${to}/${id}`)).text();
    assert.match(page, /DKIM body hash did not verify: the body changed after signing/);
  });

  test('a third party signs for the From domain: DKIM pass but aligned false, DMARC fail with p=reject', async () => {
    const to = `third-${randomUUID().slice(0, 6)}@ephemail.test`;
    const sentAt = await sendVia(svc, { from: 'Brand <news@brand.test>', sender: 'bounce@esp.test', envelope: { from: 'bounce@esp.test', to }, to, subject: 'News', text: 'Hello' }, signed('esp.test', 'mail', espKey.privateKey));
    const { authentication: a } = await verdictOf(svc, to, sentAt);
    assert.deepEqual(a.spf, { result: 'pass', domain: 'esp.test' });
    assert.deepEqual(a.dkim.map(({ result, domain, aligned }) => ({ result, domain, aligned })), [{ result: 'pass', domain: 'esp.test', aligned: false }]);
    assert.deepEqual(a.dmarc, { result: 'fail', domain: 'brand.test', policy: 'reject' });
  });

  test('a message whose job was lost (stored, never scheduled) gets its verdicts on a read', async () => {
    const to = `lost-${randomUUID().slice(0, 6)}@ephemail.test`;
    const receivedAt = Date.now() - 10_000; // older than the budget: its node would have finished it
    await svc.service.core.store.addEmails([{
      address: to, sender: 'app@pass.test', mailedBy: 'pass.test', subject: 'lost', hasAttachments: false, receivedAt, expiresAt: receivedAt + 3_600_000,
      raw: Buffer.from('From: app@pass.test\r\nSubject: lost\r\n\r\nhi\r\n'),
      envelope: { clientIp: '127.0.0.1', helo: 'client.sender.test', mailFrom: 'app@pass.test' },
    }]);
    const { authentication: a } = await verdictOf(svc, to, performance.now());
    assert.deepEqual(a.spf, { result: 'pass', domain: 'pass.test' });
  });

  test('read_email gives the three results and one line', async () => {
    const to = `mcp-${randomUUID().slice(0, 6)}@ephemail.test`;
    const sentAt = await sendVia(svc, { from: 'app@acme.test', to, subject: 'MCP', text: 'hi' }, signed('acme.test', 's1', acmeKey.privateKey));
    const { id } = await verdictOf(svc, to, sentAt);
    const r = await callRaw(svc, 'read_email', { email_id: id });
    assert.deepEqual(r.result.structuredContent.authentication, { spf: 'pass', dkim: 'pass', dmarc: 'pass' });
    assert.match(textOf(r.result), /^Authentication: SPF pass \(acme\.test\), DKIM pass \(acme\.test\), DMARC pass \(acme\.test, p=reject\)$/m);
  });
});

describe('authentication verdicts with an unreachable DNS server', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ ...UNLIMITED, EPHEMAIL_DNS_SERVERS: `127.0.0.1:${await deadPort()}` }, { authentication: { budgetMs: BUDGET_MS } });
  });
  after(async () => svc?.stop());

  test('temperror within the budget, and reads stay fast meanwhile', async () => {
    // a first message starts the worker (its start-up is not the budget's)
    const warm = `warm-${randomUUID().slice(0, 6)}@ephemail.test`;
    await verdictOf(svc, warm, await sendVia(svc, { from: 'app@acme.test', to: warm, subject: 'warm', text: 'hi' }), 30_000);
    const to = `offline-${randomUUID().slice(0, 6)}@ephemail.test`;
    const sentAt = await sendVia(svc, { from: 'app@acme.test', to, subject: 'Offline', text: 'hi' });
    // reads answer at once whether the verdicts are there yet or not (the first read derives the views)
    assert.equal((await svc.api(`/api/v1/inboxes/${to}/latest`)).status, 200);
    const t0 = performance.now();
    const first = await svc.api(`/api/v1/inboxes/${to}/latest`);
    assert.equal(first.status, 200);
    // bound: the read does not wait on DNS (reads stay fast); one-sided
    assert.ok(performance.now() - t0 < 500, 'the read did not wait for DNS');
    const { authentication: a, afterMs } = await verdictOf(svc, to, sentAt, BUDGET_MS + 3000);
    assert.equal(a.spf.result, 'temperror', JSON.stringify(a));
    // bound: temperror within the budget (the behaviour under test); one-sided
    assert.ok(afterMs < BUDGET_MS + 1500, `temperror after ${Math.round(afterMs)} ms`);
    const t1 = performance.now();
    const again = await svc.api(`/api/v1/inboxes/${to}/latest`);
    assert.equal(again.status, 200);
    // bound: a plain read, no DNS budget spent; one-sided
    assert.ok(performance.now() - t1 < 500, 'reads of a computed verdict are plain reads');
  });
});

describe('authentication verdicts on Redis', { skip: SKIP_REDIS }, () => {
  let dns: TestDns;
  let svc: TestService;
  before(async () => {
    dns = await startDns(ZONE);
    svc = await startService({
      ...UNLIMITED,
      EPHEMAIL_DNS_SERVERS: dns.server,
      EPHEMAIL_STORE: testStoreUrl(`ephtest:auth:${randomUUID().slice(0, 8)}:`),
    }, { authentication: { budgetMs: BUDGET_MS } });
  });
  after(async () => {
    await svc?.stop();
    await dns?.close();
  });

  test('the envelope is kept in the message hash: DKIM pass, SPF fail and DMARC pass through a Redis-backed service', async () => {
    const to = `redis-${randomUUID().slice(0, 6)}@ephemail.test`;
    const sentAt = await sendVia(svc, { from: 'app@acme.test', envelope: { from: 'app@fail.test', to }, to, subject: 'Redis', text: 'hi' }, signed('acme.test', 's1', acmeKey.privateKey));
    const { authentication: a } = await verdictOf(svc, to, sentAt);
    assert.deepEqual(a.spf, { result: 'fail', domain: 'fail.test' });
    assert.equal(a.dkim[0]?.result, 'pass');
    assert.deepEqual(a.dmarc, { result: 'pass', domain: 'acme.test', policy: 'reject' });
  });
});
