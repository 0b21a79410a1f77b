// Each message is stored once: one message to 100
// recipients grows the store by about one message, every recipient reads it, the oversized part is
// cut out of the stored copy (and counted), and the message is freed with its last copy.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let dbPath: string;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' });
  dbPath = svc.service.core.config.store.slice('sqlite:'.length);
});
after(() => svc.stop());

const size = (p: string) => {
  try {
    return statSync(p).size;
  } catch {
    return 0;
  }
};
const storeBytes = () => size(dbPath) + size(`${dbPath}-wal`);
const json = async (path: string) => {
  const res = await svc.api(path);
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return (await res.json()).data;
};

test('one message to 100 recipients: stored once, read by all, the 5 MB+ part cut out, freed with its last copy', { timeout: 120_000 }, async () => {
  const recipients = Array.from({ length: 100 }, (_, i) => `many${i}@ephemail.test`);
  const kept = randomBytes(1_500_000);
  const big = randomBytes(5_242_881); // one byte over the limit
  const before = storeBytes();
  const info = await svc.send({
    to: recipients, subject: 'For everyone', text: 'the same words for all', html: '<p>the same <b>words</b> for all</p>',
    attachments: [{ filename: 'kept.pdf', content: kept, contentType: 'application/pdf' }, { filename: 'big.bin', content: big }],
  });
  assert.match(info.response, /^250 /);
  const sentBytes = (kept.length + big.length) * (4 / 3); // base64 on the wire, roughly
  const summaries = await Promise.all(recipients.map(async (r) => (await json(`/api/v1/inboxes/${r}/emails`))[0]));
  assert.ok(summaries.every((s) => s && s.subject === 'For everyone' && s.has_attachments === true));
  assert.equal(new Set(summaries.map((s) => s.id)).size, 100, 'one row each');

  // read a few in full: derived once, the same for everyone
  const first = await json(`/api/v1/emails/${summaries[0].id}`);
  assert.deepEqual(first.attachments.map((a: any) => [a.filename, a.size_bytes]), [['kept.pdf', kept.length]]);
  assert.equal(first.attachments_dropped, 1, 'the part over 5 MB is counted');
  assert.match(first.html_body, /<b>words<\/b>/);
  const last = await json(`/api/v1/emails/${summaries[99].id}`);
  assert.deepEqual(last.attachments, first.attachments.map((a: any) => ({ ...a, download_url: a.download_url.replace(summaries[0].id, summaries[99].id) })));
  const dl = Buffer.from(await (await fetch(last.attachments[0].download_url)).arrayBuffer());
  assert.ok(dl.equals(kept), 'attachment bytes from the shared message');

  const raw0 = Buffer.from(await (await fetch(first.raw_url)).arrayBuffer());
  const raw99 = Buffer.from(await (await fetch(last.raw_url)).arrayBuffer());
  assert.ok(raw0.equals(raw99), 'one message, the same bytes for every recipient');
  assert.match(raw0.toString('latin1'), /X-Ephemail-Removed: body of \d+ bytes, over the 5242880-byte limit/);
  assert.ok(raw0.length < sentBytes * 0.5, 'the oversized body is not stored');

  const grown = storeBytes() - before;
  assert.ok(grown < 2 * sentBytes, `store grew by ${grown} bytes for a ${Math.round(sentBytes)}-byte message to 100 recipients (under 2×)`);

  // delete one copy: the others still read it; purge the rest: the message goes with the last
  const { store } = svc.service.core;
  const key = (await store.getEmail(summaries[99].id, Date.now()))!.messageKey;
  assert.equal((await svc.api(`/api/v1/emails/${summaries[0].id}`, { method: 'DELETE' })).status, 204);
  assert.equal((await svc.api(`/api/v1/emails/${summaries[0].id}/raw`)).status, 404);
  assert.equal((await svc.api(`/api/v1/emails/${summaries[1].id}/raw`)).status, 200);
  for (const r of recipients.slice(1)) assert.equal((await svc.api(`/api/v1/inboxes/${r}/emails`, { method: 'DELETE' })).status, 200);
  assert.equal(await store.getEmail(summaries[99].id, Date.now()), null, 'no row left');
  assert.equal(await store.readRaw(key), null, 'the message is freed with its last row');
  assert.equal(await store.readPart(key, 0), null, 'and its attachment bytes');
  const res = await svc.api(`/api/v1/emails/${summaries[99].id}/raw`);
  assert.equal(res.status, 404);
  assert.equal((await res.json()).error.type, 'not_found');
});

test('/raw: an unknown or malformed id is not_found in the spec envelope', async () => {
  for (const id of ['0190d5b0-0000-7000-8000-000000000000', 'nope']) {
    const res = await svc.api(`/api/v1/emails/${id}/raw`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.type, 'not_found');
  }
});
