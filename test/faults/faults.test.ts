// SMTP faults on demand (docs/faults.md) over real sockets on SQLite: the API and its refusals, and
// every fault kind seen by real SMTP clients, nodemailer and swaks (Debian's): the exact reply, the
// mail arriving on the attempt after a rule is used up, the delay, the dropped connection.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import nodemailer from 'nodemailer';
import { ISO_UTC, expectError } from '../helpers/contract.ts';
import { captureLog, type CapturedLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const json = { 'content-type': 'application/json' };

/** Runs Debian's swaks against the service; resolves with its exit code and transcript. */
function swaks(port: number, to: string, extra: string[] = []): Promise<{ code: number; out: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile('/usr/bin/swaks', ['--server', '127.0.0.1', '--port', String(port), '--from', 'app@sender.example', '--to', to, '--h-Subject', 'swaks test', '--body', 'Your code is 482913', '--helo', 'client.example', ...extra],
      { timeout: 30_000 }, (err, stdout, stderr) => resolve({ code: err ? Number((err as NodeJS.ErrnoException & { code?: number }).code ?? 1) : 0, out: stdout + stderr, ms: performance.now() - t0 }));
  });
}

describe('SMTP faults on demand', () => {
  let svc: TestService;
  let key: string;
  let other: string;
  let logs: CapturedLog;
  let base: string;
  before(async () => {
    logs = captureLog('info');
    svc = await startService({ EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '10' }, { log: logs.log });
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    base = svc.http.replace('127.0.0.1', 'localhost');
    other = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());
  const auth = (k = key) => ({ authorization: `Bearer ${k}` });
  const add = (address: string, body: unknown, k: string | null = key) =>
    svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/faults`, { method: 'POST', headers: { ...json, ...(k ? auth(k) : {}) }, body: JSON.stringify(body) });
  const list = async (address: string, k = key) => (await (await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/faults`, { headers: auth(k) })).json()) as any;
  const count = async (address: string) => (await (await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`)).json()).meta.count as number;
  const nodemailerTo = (to: string | string[], opts: Record<string, unknown> = {}) => {
    const t = nodemailer.createTransport({ host: '127.0.0.1', port: svc.smtpPort, secure: false, ignoreTLS: true, pool: false, ...opts });
    return t.sendMail({ from: 'App <app@sender.example>', to, subject: 'Verify', text: 'Your code is 482913' }).finally(() => t.close());
  };

  test('rules need a key (401 key_required); a 2xx reply, two kinds at once, a delay at rcpt, two lines are 400', async () => {
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '451 4.7.1 Try again later' }, null), 401, 'key_required', base);
    await expectError(await svc.api('/api/v1/inboxes/a%40ephemail.test/faults'), 401, 'key_required', base);
    await expectError(await svc.api('/api/v1/inboxes/a%40ephemail.test/faults', { method: 'DELETE' }), 401, 'key_required', base);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '250 2.0.0 Ok' }), 400, 'invalid_request', base, /4xx or 5xx/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '354 go ahead' }), 400, 'invalid_request', base, /not an error/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '451 Try again' }), 400, 'invalid_request', base, /enhanced status code/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '451 5.7.1 Try again' }), 400, 'invalid_request', base, /class/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: '451 4.7.1 a\r\n250 ok' }), 400, 'invalid_request', base, /one line/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', reply: `451 4.7.1 ${'x'.repeat(200)}` }), 400, 'invalid_request', base);
    await expectError(await add('a@ephemail.test', { stage: 'data', reply: '451 4.7.1 x', disconnect: true }), 400, 'invalid_request', base, /exactly one/);
    await expectError(await add('a@ephemail.test', { stage: 'rcpt', delay_seconds: 5 }), 400, 'invalid_request', base, /stage "data" only/);
    await expectError(await add('a@ephemail.test', { stage: 'data', delay_seconds: 121 }), 400, 'invalid_request', base);
    await expectError(await add('a@ephemail.test', { stage: 'data', disconnect: false }), 400, 'invalid_request', base);
    await expectError(await add('a@ephemail.test', { stage: 'helo', reply: '451 4.7.1 x' }), 400, 'invalid_request', base);
    await expectError(await add('not-an-address', { stage: 'rcpt', reply: '451 4.7.1 x' }), 400, 'invalid_request', base);
    await expectError(await add('a@elsewhere.example', { stage: 'rcpt', reply: '451 4.7.1 x' }), 404, 'not_found', base);
    assert.equal((await list('a@ephemail.test')).meta.count, 0, 'nothing was kept');
  });

  test('201 with the rule; a key sees its own rules; delete one, clear, 404 for an unknown id; 409 past 20 per address for one key, while another key adds its own', async () => {
    const res = await add('Crud@ephemail.test', { stage: 'rcpt', reply: '451 4.7.1 Try again later', times: 2 });
    assert.equal(res.status, 201);
    const rule = (await res.json()).data;
    assert.match(rule.id, /^flt_/);
    assert.equal(rule.address, 'crud@ephemail.test');
    assert.equal(rule.stage, 'rcpt');
    assert.equal(rule.reply, '451 4.7.1 Try again later');
    assert.equal(rule.times, 2);
    assert.equal(rule.remaining, 2);
    assert.match(rule.created_at, ISO_UTC);
    assert.equal(Date.parse(rule.expires_at) - Date.parse(rule.created_at), 3600_000, 'expires with the inbox TTL');
    const delayed = (await (await add('crud@ephemail.test', { stage: 'data', delay_seconds: 20 })).json()).data;
    assert.equal(delayed.delay_seconds, 20);
    assert.equal(delayed.times, null);
    assert.equal(delayed.remaining, null);
    assert.equal('reply' in delayed, false);
    const dropped = (await (await add('crud@ephemail.test', { stage: 'data', disconnect: true, times: 1 })).json()).data;
    assert.equal(dropped.disconnect, true);

    const mine = await list('crud@ephemail.test');
    assert.deepEqual(mine.data.map((r: any) => r.id), [rule.id, delayed.id, dropped.id], 'creation order');
    assert.equal((await list('crud@ephemail.test', other)).meta.count, 0, 'another key sees none of them');
    const path = `/api/v1/inboxes/crud%40ephemail.test/faults`;
    await expectError(await svc.api(`${path}/${delayed.id}`, { method: 'DELETE', headers: auth(other) }), 404, 'not_found', base);
    assert.equal((await svc.api(`${path}/${delayed.id}`, { method: 'DELETE', headers: auth() })).status, 204);
    await expectError(await svc.api(`${path}/${delayed.id}`, { method: 'DELETE', headers: auth() }), 404, 'not_found', base);
    assert.deepEqual((await list('crud@ephemail.test')).data.map((r: any) => r.id), [rule.id, dropped.id]);
    const cleared = await svc.api(path, { method: 'DELETE', headers: auth() });
    assert.deepEqual((await cleared.json()).data, { address: 'crud@ephemail.test', deleted: 2 });
    assert.equal((await list('crud@ephemail.test')).meta.count, 0);

    for (let i = 0; i < 20; i++) assert.equal((await add('full@ephemail.test', { stage: 'rcpt', reply: `450 4.2.1 busy ${i}` })).status, 201);
    await expectError(await add('full@ephemail.test', { stage: 'rcpt', reply: '450 4.2.1 one more' }), 409, 'conflict', base, /this key already has 20 fault rules on full@ephemail\.test/);
    assert.equal((await add('full@ephemail.test', { stage: 'rcpt', reply: '450 4.2.1 my own' }, other)).status, 201, 'another key has its own 20');
    assert.deepEqual((await list('full@ephemail.test', other)).meta, { address: 'full@ephemail.test', count: 1, other_rules: 20 });
    await svc.api('/api/v1/inboxes/full%40ephemail.test/faults', { method: 'DELETE', headers: auth() });
    await svc.api('/api/v1/inboxes/full%40ephemail.test/faults', { method: 'DELETE', headers: auth(other) });
  });

  test('rcpt 451 times 2 (nodemailer): the exact reply twice, then the mail arrives; remaining counts down', async () => {
    const to = 'greylist@ephemail.test';
    const rule = (await (await add(to, { stage: 'rcpt', reply: '451 4.7.1 Greylisted, try again later', times: 2 })).json()).data;
    for (let i = 0; i < 2; i++) {
      await assert.rejects(nodemailerTo(to), (err: any) => {
        assert.equal(err.responseCode, 451);
        assert.equal(err.response, '451 4.7.1 Greylisted, try again later', 'sent as given');
        return true;
      });
    }
    assert.equal(await count(to), 0, 'a refused transaction stores nothing');
    assert.equal((await list(to)).data[0].remaining, 0);
    const ok = await nodemailerTo(to);
    assert.match(ok.response, /^250 /);
    assert.equal(await count(to), 1, 'the attempt after the rule is used up gets the mail');
    assert.equal((await list(to)).data[0].id, rule.id, 'a used-up rule stays listed');
  });

  test('rcpt 550 (swaks): the exact reply, the other recipient unaffected; after the rule is deleted swaks delivers', async () => {
    const to = 'bounce@ephemail.test';
    const rule = (await (await add(to, { stage: 'rcpt', reply: '550 5.1.1 No such user here' })).json()).data;
    const refused = await swaks(svc.smtpPort, to);
    assert.notEqual(refused.code, 0, refused.out);
    assert.match(refused.out, /<\*\* +550 5\.1\.1 No such user here\r?\n/, refused.out);
    const both = await sendRaw(svc.smtpPort, { from: 'app@sender.example', to: [to, 'bystander@ephemail.test'], body: message({ From: 'app@sender.example', Subject: 'two' }, 'hi') });
    assert.deepEqual(both.rcpt.map((r) => r.code), [550, 250]);
    assert.equal(both.rcpt[0].text, '5.1.1 No such user here');
    assert.equal(both.data?.code, 250);
    assert.equal(await count('bystander@ephemail.test'), 1);
    assert.equal(await count(to), 0);
    assert.equal((await list(to)).data[0].remaining, null, 'unlimited');
    assert.equal((await svc.api(`/api/v1/inboxes/${encodeURIComponent(to)}/faults/${rule.id}`, { method: 'DELETE', headers: auth() })).status, 204);
    const ok = await swaks(svc.smtpPort, to);
    assert.equal(ok.code, 0, ok.out);
    assert.equal(await count(to), 1);
  });

  test('data 554 times 1: the whole transaction gets it and nothing is stored for any recipient; the next one is', async () => {
    const to = 'dataref@ephemail.test';
    await add(to, { stage: 'data', reply: '554 5.7.1 Message rejected as spam', times: 1 }, other); // any key's rule applies
    const first = await swaks(svc.smtpPort, `cc@ephemail.test,${to}`);
    assert.notEqual(first.code, 0);
    assert.match(first.out, /<\*\* +554 5\.7\.1 Message rejected as spam\r?\n/, first.out);
    assert.match(first.out, /<- +250 .*\r?\n<- +250 .*\r?\n -> DATA/s, 'both RCPTs were accepted');
    assert.equal(await count(to), 0);
    assert.equal(await count('cc@ephemail.test'), 0, 'nothing stored for the other recipient either');
    const next = await nodemailerTo([to, 'cc@ephemail.test']);
    assert.match(next.response, /^250 /);
    assert.equal(await count(to), 1);
    assert.equal(await count('cc@ephemail.test'), 1);
  });

  test('data 451 (nodemailer) applies in creation order: the first rule until used up, then the second', async () => {
    const to = 'order@ephemail.test';
    await add(to, { stage: 'data', reply: '451 4.3.2 First rule', times: 1 });
    await add(to, { stage: 'data', reply: '452 4.3.1 Second rule', times: 1 });
    for (const expected of ['451 4.3.2 First rule', '452 4.3.1 Second rule']) {
      await assert.rejects(nodemailerTo(to), (err: any) => {
        assert.equal(err.response, expected);
        return true;
      });
    }
    assert.match((await nodemailerTo(to)).response, /^250 /);
    assert.equal(await count(to), 1);
  });

  test('a delay holds the final reply to DATA (nodemailer, swaks); a client that times out leaves nothing stored', async () => {
    const to = 'slow@ephemail.test';
    await add(to, { stage: 'data', delay_seconds: 2, times: 1 });
    await add(to, { stage: 'data', delay_seconds: 5, times: 1 });
    const t0 = performance.now();
    const ok = await nodemailerTo(to);
    const ms = performance.now() - t0;
    assert.match(ok.response, /^250 /);
    // bound: the 2 s delay is observed (lower bound), and only the first rule's (the second adds 5 s)
    assert.ok(ms >= 2000 && ms < 6000, `the 250 came ${Math.round(ms)} ms after the start`);
    assert.equal(await count(to), 1, 'a delayed mail is then stored as usual');
    // a mailer with a 1 s timeout gives up on the stalled server (swaks waits 1 s more for QUIT's reply)
    const gaveUp = await swaks(svc.smtpPort, to, ['--timeout', '1']);
    assert.notEqual(gaveUp.code, 0, gaveUp.out);
    assert.match(gaveUp.out, /timeout|timed out/i, gaveUp.out);
    assert.match(gaveUp.out, /-> \.\r?\n<\*\* Timeout \(1 secs\) waiting for server response/, 'the timeout came after the end of DATA');
    // bound: swaks gave up at its 1 s timeout, not after the 5 s delay; one-sided
    assert.ok(gaveUp.ms < 4500, `swaks gave up after ${Math.round(gaveUp.ms)} ms: ${gaveUp.out}`);
    // after the delay the service finds the client gone and stores nothing
    await until(() => logs.find('the client left during the delay').length === 1, 'the delay to end', 8000);
    assert.equal(await count(to), 1, 'nothing stored for a client that left');
    assert.deepEqual((await list(to)).data.map((r: any) => r.remaining), [0, 0]);
    const fast = performance.now();
    await nodemailerTo(to);
    // bound: both delay rules are used up: the reply comes before the smaller delay (2 s) would end
    assert.ok(performance.now() - fast < 1900, 'used up: no delay');
    assert.equal(await count(to), 2);
  });

  test('disconnect drops the connection instead of the reply (nodemailer, swaks); nothing stored; then delivered', async () => {
    const to = 'drop@ephemail.test';
    await add(to, { stage: 'data', disconnect: true, times: 2 });
    await assert.rejects(nodemailerTo(to), (err: any) => {
      assert.equal(err.code, 'ECONNECTION', String(err));
      assert.match(err.message, /closed unexpectedly/i);
      return true;
    });
    const cut = await swaks(svc.smtpPort, to);
    assert.notEqual(cut.code, 0, cut.out);
    assert.match(cut.out, /connection .*(lost|closed)|Remote host closed/i, cut.out);
    assert.equal(await count(to), 0);
    assert.equal((await swaks(svc.smtpPort, to)).code, 0);
    assert.equal(await count(to), 1);
  });

  test('an address without rules is answered as before; its RCPT costs one indexed read', async () => {
    const r = await sendRaw(svc.smtpPort, { from: 'a@sender.example', to: ['plain@ephemail.test'], body: message({ Subject: 'x' }, 'y') });
    assert.equal(r.rcpt[0].code, 250);
    assert.equal(r.data?.code, 250);
    // a quick check of the fast path: 2,000 lookups of an address with no rule
    const faults = svc.service.store.faults;
    const t0 = performance.now();
    for (let i = 0; i < 2000; i++) await faults.takeFault(`nobody${i}@ephemail.test`, 'rcpt', Date.now());
    const perLookup = (performance.now() - t0) / 2000;
    // bound: the no-rule path is one indexed read (a scan would be far slower); one-sided, generous
    assert.ok(perLookup < 0.5, `${perLookup.toFixed(4)} ms per lookup`);
  });
});
