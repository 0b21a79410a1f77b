// Wait-for-match: the list's `from` and `subject` filters and GET /inboxes/{address}/latest
//, over real SMTP and HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { formatUuidV7 } from '../../src/domain/ids.ts';
import { expectError, expectFull } from '../helpers/contract.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';


describe('filters and latest', () => {
  let svc: TestService;
  let key: string;
  const base = () => svc.http.replace('127.0.0.1', 'localhost');
  before(async () => {
    svc = await startService();
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());
  const mail = (to: string, from: string, subject: string, body = 'body') =>
    sendRaw(svc.smtpPort, { from: 'bounce@sender.example', to: [to], body: message({ From: from, To: to, Subject: subject }, body) });
  const heldOn = (n: number) => until(() => svc.service.core.waits.held >= n, `${n} requests are held`);
  const get = (path: string, withKey = true) => svc.api(path, withKey ? { headers: { authorization: `Bearer ${key}` } } : {});

  test('the list filters by From and Subject: case-insensitive substrings of the decoded headers, combined with limit and since', async () => {
    const a = 'filters@ephemail.test';
    await mail(a, '"Acme Billing" <billing@acme.example>', 'Your invoice 42');
    await mail(a, 'GitHub <noreply@github.example>', '[GitHub] Please verify your device');
    await mail(a, 'GitHub <noreply@github.example>', '[GitHub] A new SSH key was added');
    await mail(a, 'Jürgen <j@example.de>', '=?utf-8?q?Best=C3=A4tigen_Sie_Ihre_Adresse?=');
    const list = async (q: string) => (await (await get(`/api/v1/inboxes/${a}/emails?${q}`, false)).json());
    assert.deepEqual((await list('from=github')).data.map((e: any) => e.subject), ['[GitHub] A new SSH key was added', '[GitHub] Please verify your device']);
    assert.deepEqual((await list('from=GITHUB&subject=verify')).data.map((e: any) => e.subject), ['[GitHub] Please verify your device']);
    assert.deepEqual((await list('subject=BESTÄTIGEN')).data.map((e: any) => e.sender), ['Jürgen <j@example.de>'], 'decoded, Unicode case-folded');
    assert.deepEqual((await list('from=acme.example')).data.length, 1);
    assert.deepEqual((await list('subject=nothing-like-this')).data, []);
    const limited = await list('from=github&limit=1');
    assert.equal(limited.data.length, 1);
    assert.equal(limited.data[0].subject, '[GitHub] A new SSH key was added');
    const older = await list(`from=github&before=${limited.meta.next_before}`);
    assert.deepEqual(older.data.map((e: any) => e.subject), ['[GitHub] Please verify your device'], 'pages with before');
    const all = await list('limit=100');
    const since = await list(`from=github&since=${all.data.at(-1).id}`);
    assert.deepEqual(since.data.map((e: any) => e.subject), ['[GitHub] Please verify your device', '[GitHub] A new SSH key was added'], 'oldest first with since');
    await expectError(await get(`/api/v1/inboxes/${a}/emails?subject=${'x'.repeat(201)}`, false), 400, 'invalid_request', base());
  });

  test('a held, filtered wait ignores mail that does not match and returns the one that does', async () => {
    const a = 'heldfilter@ephemail.test';
    const pending = get(`/api/v1/inboxes/${a}/emails?wait=20&subject=verification`);
    await heldOn(1);
    // wakes the wait, which queries, finds no match and waits on (a match arriving meanwhile is not missed)
    assert.equal((await mail(a, 'news@shop.example', 'Our weekly deals')).data?.code, 250);
    const t0 = Date.now();
    assert.equal((await mail(a, 'auth@app.example', 'Your verification code')).data?.code, 250);
    const body = await (await pending).json();
    // bound: woken by the matching delivery, not the 20 s deadline: one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 10_000, 'woken by the matching 250, well before the deadline');
    assert.equal(body.meta.waited, true);
    assert.deepEqual(body.data.map((e: any) => e.subject), ['Your verification code']);
  });

  test('latest: the newest matching email in full, or null; wait needs a key', async () => {
    const a = 'latest@ephemail.test';
    let res = await get(`/api/v1/inboxes/${a}/latest`, false);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { data: null, meta: { address: a, waited: false } });
    await mail(a, 'auth@app.example', 'Code for you', 'first');
    await mail(a, 'news@shop.example', 'Deals', 'second');
    res = await get(`/api/v1/inboxes/${a}/latest`, false);
    const newest = (await res.json()).data;
    expectFull(newest);
    assert.equal(newest.subject, 'Deals');
    const matched = (await (await get(`/api/v1/inboxes/${a}/latest?from=AUTH@app`, false)).json()).data;
    assert.equal(matched.subject, 'Code for you');
    assert.match(matched.text_body, /first/);
    await expectError(await get(`/api/v1/inboxes/${a}/latest?wait=5`, false), 401, 'key_required', base());
    await expectError(await get(`/api/v1/inboxes/${a}/latest?since=nope`, false), 400, 'invalid_request', base(), /since/);
    await expectError(await get('/api/v1/inboxes/x@gmail.com/latest', false), 404, 'not_found', base());
  });

  test('latest?wait=20&subject=… wakes on the matching 250 (not its deadline) and ignores non-matching mail that arrives first', async () => {
    const a = 'latestwait@ephemail.test';
    await mail(a, 'auth@app.example', 'Your login code (old)');
    // "only mail from now on": a UUIDv7 made from the current time
    const now = formatUuidV7(Date.now(), 0n, 0);
    const t0 = Date.now();
    const pending = get(`/api/v1/inboxes/${a}/latest?wait=20&subject=login%20code&since=${now}`);
    await heldOn(1);
    assert.equal((await mail(a, 'news@shop.example', 'Newsletter')).data?.code, 250);
    const sent = Date.now();
    assert.equal((await mail(a, 'auth@app.example', 'Your login code is 559120')).data?.code, 250);
    const res = await pending;
    assert.equal(res.status, 200);
    const body = await res.json();
    // bound: woken by the matching delivery, not the 20 s deadline: one-sided, generous for a loaded machine
    assert.ok(Date.now() - sent < 10_000, `answered ${Date.now() - sent} ms after the matching 250`);
    // bound: well before the 20 s deadline
    assert.ok(Date.now() - t0 < 15_000);
    assert.equal(body.meta.waited, true);
    assert.equal(body.data.subject, 'Your login code is 559120', 'not the older match, not the newsletter');
  });

  test('latest with wait and nothing matching returns null when the wait runs out ("expect no mail")', async () => {
    const a = 'latestnone@ephemail.test';
    const t0 = Date.now();
    const body = await (await get(`/api/v1/inboxes/${a}/latest?wait=1&since=${formatUuidV7(Date.now(), 0n, 0)}`)).json();
    assert.deepEqual(body, { data: null, meta: { address: a, waited: true } });
    // bound: the 1 s wait ran out (a lower bound: a loaded machine only makes it longer)
    assert.ok(Date.now() - t0 >= 900);
  });
});
