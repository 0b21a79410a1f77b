// List ordering and cursors (spec: GET /inboxes/{address}/emails rules 1-3; docs/contract-decisions.md "List
// cursors", "Ids are strictly increasing").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, toWire, message } from '../helpers/smtp.ts';

let svc: TestService;
after(() => svc.stop());

const page = async (address: string, q: string) => {
  const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?${q}`);
  assert.equal(res.status, 200, await res.clone().text());
  return res.json() as Promise<{ data: any[]; meta: any }>;
};

/** Sends `n` messages in one SMTP session, pipelined back to back; returns subjects in send order. */
async function burst(address: string, n: number, tag: string): Promise<string[]> {
  const { client } = await SmtpClient.open(svc.smtpPort);
  const subjects: string[] = [];
  await client.cmd('EHLO burst.example');
  for (let i = 0; i < n; i++) {
    const subject = `${tag}-${i}`;
    subjects.push(subject);
    const body = toWire(message({ From: 'b@burst.example', To: address, Subject: subject }, `n=${i}`));
    // MAIL, RCPT and DATA pipelined (PIPELINING), then the body
    client.write(`MAIL FROM:<b@burst.example>\r\nRCPT TO:<${address}>\r\nDATA\r\n`);
    assert.equal((await client.read()).code, 250);
    assert.equal((await client.read()).code, 250);
    assert.equal((await client.read()).code, 354);
    client.write(Buffer.concat([body, Buffer.from('.\r\n')]));
    const r = await client.read();
    assert.equal(r.code, 250, r.text);
  }
  await client.quit();
  return subjects;
}

let address: string;
let subjects: string[];
let ids: string[];
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000', EPHEMAIL_LIMIT_ANON_PER_DAY: '100000' });
  address = 'cursor-test@ephemail.test';
  subjects = await burst(address, 7, 'c');
  const all = await page(address, 'limit=100');
  ids = all.data.map((e) => e.id).reverse(); // oldest first
});

test('ids are strictly increasing in arrival order for a quick burst', async () => {
  assert.equal(ids.length, 7);
  const all = await page(address, 'limit=100');
  assert.deepEqual(all.data.map((e) => e.subject), [...subjects].reverse(), 'newest first == reverse send order');
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids[i]} > ${ids[i - 1]}`);
});

test('a bigger burst from parallel connections gets unique, strictly ordered ids', async () => {
  const addr = 'burst-parallel@ephemail.test';
  await Promise.all([burst(addr, 10, 'p0'), burst(addr, 10, 'p1'), burst(addr, 10, 'p2')]);
  const all = await page(addr, 'limit=100');
  assert.equal(all.data.length, 30);
  const got = all.data.map((e) => e.id);
  assert.equal(new Set(got).size, 30);
  for (let i = 1; i < got.length; i++) assert.ok(got[i] < got[i - 1], 'newest first, strictly');
  for (const tag of ['p0', 'p1', 'p2']) {
    const mine = all.data.filter((e) => e.subject.startsWith(`${tag}-`)).map((e) => Number(e.subject.split('-')[1]));
    assert.deepEqual(mine, [...mine].sort((a, b) => b - a), `per-connection order kept for ${tag}`);
  }
});

test('without since: newest first; next_before pages back through 7 with limit 3', async () => {
  const seen: string[] = [];
  let q = 'limit=3';
  const pages: number[] = [];
  for (let i = 0; i < 10; i++) {
    const p = await page(address, q);
    pages.push(p.data.length);
    for (let j = 1; j < p.data.length; j++) assert.ok(p.data[j].id < p.data[j - 1].id, 'newest first');
    seen.push(...p.data.map((e) => e.id));
    assert.equal(p.meta.count, p.data.length);
    assert.equal(p.meta.waited, false);
    if (p.data.length) assert.equal(p.meta.next_since, p.data[0].id, 'next_since is the newest item');
    if (!p.meta.next_before) break;
    assert.equal(p.meta.next_before, p.data.at(-1).id, 'next_before is the oldest item of the page');
    q = `limit=3&before=${p.meta.next_before}`;
  }
  assert.deepEqual(seen, [...ids].reverse(), 'every email exactly once, newest first');
  assert.equal(pages[0], 3);
  assert.equal(pages[1], 3);
  assert.ok(pages.length <= 4);
});

test('with since: oldest first; next_since pages forward through 7 with limit 3', async () => {
  const seen: string[] = [];
  const first = await page(address, 'limit=1&since=00000000-0000-0000-0000-000000000000');
  assert.equal(first.data[0].id, ids[0], 'since the zero id starts at the oldest');
  let cursor = '00000000-0000-0000-0000-000000000000';
  for (let i = 0; i < 10; i++) {
    const p = await page(address, `limit=3&since=${cursor}`);
    for (let j = 1; j < p.data.length; j++) assert.ok(p.data[j].id > p.data[j - 1].id, 'oldest first');
    seen.push(...p.data.map((e) => e.id));
    if (p.data.length === 0) {
      assert.equal(p.meta.next_since, cursor, 'an empty page echoes the cursor');
      break;
    }
    assert.equal(p.meta.next_since, p.data.at(-1).id, 'next_since is the newest (last) item');
    cursor = p.meta.next_since;
  }
  assert.deepEqual(seen, ids, 'every email exactly once, oldest first');
});

test('since the newest id: empty; new mail then shows up exactly once', async () => {
  const addr = 'poller@ephemail.test';
  await burst(addr, 2, 'old');
  const init = await page(addr, 'limit=25');
  const cursor = init.meta.next_since;
  assert.equal(cursor, init.data[0].id);
  const empty = await page(addr, `since=${cursor}`);
  assert.deepEqual(empty.data, []);
  assert.equal(empty.meta.next_since, cursor);
  assert.equal(empty.meta.next_before, null);
  await burst(addr, 2, 'new');
  const fresh = await page(addr, `since=${cursor}`);
  assert.deepEqual(fresh.data.map((e) => e.subject), ['new-0', 'new-1']);
  const again = await page(addr, `since=${fresh.meta.next_since}`);
  assert.deepEqual(again.data, []);
});

test('a cursor need not name an existing email: ids compare by order', async () => {
  const del = await svc.api(`/api/v1/emails/${ids[3]}`, { method: 'DELETE' });
  assert.equal(del.status, 204);
  const newer = await page(address, `since=${ids[3]}`);
  assert.deepEqual(newer.data.map((e) => e.id), ids.slice(4));
  const older = await page(address, `before=${ids[3]}`);
  assert.deepEqual(older.data.map((e) => e.id), ids.slice(0, 3).reverse());
  const fromUpper = await page(address, `since=${ids[3].toUpperCase()}`);
  assert.deepEqual(fromUpper.data.map((e) => e.id), ids.slice(4));
});

test('default limit is 25, next_before null when the page is not full', async () => {
  const addr = 'many@ephemail.test';
  await burst(addr, 27, 'm');
  const p = await page(addr, '');
  assert.equal(p.data.length, 25);
  assert.equal(p.meta.count, 25);
  assert.ok(p.meta.next_before);
  const rest = await page(addr, `before=${p.meta.next_before}`);
  assert.equal(rest.data.length, 2);
  assert.equal(rest.meta.next_before, null);
});

test('a reader advancing since (with wait) during concurrent delivery sees every email exactly once, in id order', { timeout: 120_000 }, async () => {
  const addr = 'live-reader@ephemail.test';
  const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  const seen: { id: string; subject: string }[] = [];
  let cursor = '00000000-0000-0000-0000-000000000000';
  let sendingDone = false;
  const reader = (async () => {
    for (let polls = 0; polls < 500; polls++) {
      const res = await svc.api(`/api/v1/inboxes/${addr}/emails?since=${cursor}&limit=7&wait=2`, { headers: { 'x-api-key': key } });
      assert.equal(res.status, 200);
      const body = await res.json();
      seen.push(...body.data.map((e: any) => ({ id: e.id, subject: e.subject })));
      if (body.data.length) assert.equal(body.meta.next_since, body.data.at(-1).id);
      cursor = body.meta.next_since;
      if (sendingDone && body.data.length === 0) return;
    }
  })();
  const sent = (await Promise.all([0, 1, 2, 3].map((n) => burst(addr, 15, `live${n}`)))).flat();
  sendingDone = true;
  await reader;
  assert.equal(seen.length, sent.length, 'nothing skipped, nothing repeated');
  assert.deepEqual(new Set(seen.map((e) => e.subject)), new Set(sent));
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].id > seen[i - 1].id, 'ids strictly increase along the cursor');
});
