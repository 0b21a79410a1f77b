// The mail seam's conformance suite (src/store/store.ts MailStore; docs/house-style.md rule 2): every
// backend runs it unchanged. Times are near the real clock (Redis expires keys by its own clock);
// expiry is exercised by passing a later `now`. Behaviour that differs by backend is read from
// store.capabilities only.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import type { MailStore } from '../../src/store/store.ts';
import { inbox, newEmail, rawMessage, storeTest, type StoreHarness } from './harness.ts';

const HOUR = 3_600_000;
const UUIDV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function rawOf(store: MailStore, id: string, now: number): Promise<Buffer | null> {
  const row = await store.getEmail(id, now);
  const raw = row && (await store.readRaw(row.messageKey));
  return raw && (await collect(raw.chunks)).bytes;
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<{ bytes: Buffer; count: number }> {
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return { bytes: Buffer.concat(parts), count: parts.length };
}

function increasing(ids: string[], what: string): void {
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${what}: ${ids[i]} > ${ids[i - 1]} at ${i}`);
}

export function mailSuite(name: string, harness: StoreHarness<MailStore>): void {
  if (harness.skip) {
    // one skipped test with the reason: a skipped describe would count as no test at all
    it(`Mail store conformance: ${name}`, { skip: harness.skip }, () => undefined);
    return;
  }
  describe(`Mail store conformance: ${name}`, { concurrency: 1 }, () => {
    const withStore = storeTest(harness);

    it('after close, ping and reads reject with StoreUnavailableError', async () => {
      const store = await harness.open();
      await store.close();
      await assert.rejects(store.ping(), (e: unknown) => e instanceof StoreUnavailableError, 'ping');
      await assert.rejects(store.listEmails(inbox(), { limit: 1 }, Date.now()), (e: unknown) => e instanceof StoreUnavailableError, 'listEmails');
    });

    withStore('addEmails returns summaries in input order with UUIDv7 ids and their message keys; getEmail returns the row and its message', async (store) => {
      const a = inbox();
      const b = inbox();
      const now = Date.now();
      const bytes = Buffer.concat([Buffer.from('Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n\r\n'), randomBytes(300 * 1024 + 7)]);
      const full = newEmail(a, { sender: '"Ünïcode" <u@example.org>', mailedBy: null, subject: 'Grüße 👋', hasAttachments: true, raw: bytes });
      const res = await store.addEmails([full, newEmail(b, { subject: 'second' })]);
      assert.equal(res.length, 2);
      assert.equal(res[0].address, a);
      assert.equal(res[1].address, b);
      assert.equal(res[1].subject, 'second');
      for (const s of res) assert.match(s.id, UUIDV7);
      if (store.capabilities.orderedAcrossInboxes) assert.ok(res[1].id > res[0].id);
      const got = await store.getEmail(res[0].id, now);
      const summary = {
        id: res[0].id, address: a, sender: full.sender, mailedBy: null, subject: full.subject, hasAttachments: true,
        receivedAt: full.receivedAt, expiresAt: full.expiresAt,
      };
      assert.deepEqual(res[0], { ...summary, messageKey: got?.messageKey });
      assert.deepEqual({ ...got, messageKey: undefined }, { ...summary, messageKey: undefined });
      assert.equal(typeof got?.messageKey, 'string');
      assert.notEqual(res[1].messageKey, res[0].messageKey, 'two messages, two keys');
      const raw = await store.readRaw(got!.messageKey);
      assert.equal(raw?.sizeBytes, bytes.length);
      const read = await collect(raw!.chunks);
      assert.ok(read.bytes.equals(bytes), 'the message comes back byte for byte');
      assert.ok(read.count > 1, 'a large message is read in chunks');
      assert.equal(await store.getEmail(res[0].id.toUpperCase(), now).then((e) => e?.id), res[0].id, 'ids are case-insensitive');
      assert.equal(await store.getEmail(randomUUID(), now), null);
      assert.equal(await store.readRaw('no-such-message'), null);
      assert.deepEqual(await store.addEmails([]), []);
    });

    withStore('a message to several inboxes is stored once; deleting one copy keeps the others; the last frees it', async (store) => {
      const boxes = [inbox(), inbox(), inbox()];
      const now = Date.now();
      const raw = rawMessage('shared');
      const rows = await store.addEmails(boxes.map((b) => newEmail(b, { subject: 'shared', raw })));
      const stored = await Promise.all(rows.map((r) => store.getEmail(r.id, now)));
      const keys = new Set(stored.map((s) => s!.messageKey));
      assert.equal(keys.size, 1, 'one message for every recipient');
      assert.deepEqual(new Set(rows.map((r) => r.messageKey)), keys, 'addEmails gives each row the key of its message');
      const [key] = keys;
      assert.equal(new Set(rows.map((r) => r.id)).size, 3, 'one row each');
      await store.putViews(key, '{"v":1}', [Buffer.from('part zero'), Buffer.alloc(0)]);
      assert.equal(await store.getViews(key), '{"v":1}');
      assert.equal(await store.deleteEmail(rows[0].id, now), true);
      assert.equal(await store.getEmail(rows[0].id, now), null);
      assert.ok((await rawOf(store, rows[1].id, now))?.equals(raw), 'the others still read the message');
      assert.equal(await store.getViews(key), '{"v":1}', 'and its views');
      assert.equal(await store.purgeInbox(boxes[1], now), 1);
      assert.ok((await rawOf(store, rows[2].id, now))?.equals(raw));
      assert.equal(await store.deleteEmail(rows[2].id, now), true);
      assert.equal(await store.readRaw(key), null, 'the last copy frees the message');
      assert.equal(await store.getViews(key), null, 'and its views');
      assert.equal(await store.readPart(key, 0), null, 'and its parts');
      await store.putViews(key, '{"v":2}', [Buffer.from('late')]);
      assert.equal(await store.getViews(key), null, 'views of a freed message are not written');
      // distinct messages stay distinct, even with equal bytes
      const [x, y] = await store.addEmails([newEmail(boxes[0], { raw: Buffer.from(raw) }), newEmail(boxes[0], { raw: Buffer.from(raw) })]);
      assert.notEqual((await store.getEmail(x.id, now))!.messageKey, (await store.getEmail(y.id, now))!.messageKey);
    });

    withStore('views and parts: written once, read in chunks, replaced by a later write', async (store) => {
      const a = inbox();
      const now = Date.now();
      const [e] = await store.addEmails([newEmail(a)]);
      const key = (await store.getEmail(e.id, now))!.messageKey;
      assert.equal(await store.getViews(key), null, 'none until derived');
      assert.equal(await store.readPart(key, 0), null);
      const big = randomBytes(700 * 1024 + 13);
      const small = Buffer.from([0, 1, 2, 255, 0]);
      await store.putViews(key, JSON.stringify({ n: 'ä👋' }), [new Uint8Array(big.buffer, big.byteOffset, big.byteLength), small, new Uint8Array(0)]);
      assert.equal(await store.getViews(key), JSON.stringify({ n: 'ä👋' }));
      const first = await store.readPart(key, 0);
      assert.equal(first?.sizeBytes, big.length);
      const got = await collect(first!.chunks);
      assert.ok(got.bytes.equals(big), 'bytes round-trip');
      assert.ok(got.count > 1, 'a large part is read in several chunks');
      assert.ok((await collect((await store.readPart(key, 1))!.chunks)).bytes.equals(small));
      assert.equal((await store.readPart(key, 2))?.sizeBytes, 0);
      assert.equal(await store.readPart(key, 3), null);
      await store.putViews(key, '{}', [small]);
      assert.equal(await store.getViews(key), '{}');
      assert.equal(await store.readPart(key, 1), null, 'a later write replaces every part');
      assert.ok((await collect((await store.readPart(key, 0))!.chunks)).bytes.equals(small));
    });

    withStore('search texts: kept with the message (shared by its rows), matched in the order asked; none → null until put', async (store) => {
      const [a, b] = [inbox(), inbox()];
      const now = Date.now();
      const raw = rawMessage('shared');
      const long = `${'x'.repeat(30_000)} grüße 👋 tail`;
      const [s1, s2, other, legacy, gone, expired] = await store.addEmails([
        newEmail(a, { raw, searchText: 'your code is 559120' }),
        newEmail(b, { raw, searchText: 'your code is 559120' }),
        newEmail(a, { searchText: long }),
        newEmail(a), // stored without one (before search texts existed)
        newEmail(a, { searchText: 'deleted' }),
        newEmail(a, { searchText: 'expired', expiresAt: now + 5_000 }),
      ]);
      assert.ok(await store.deleteEmail(gone.id, now));
      const ids = [other.id, s1.id, legacy.id, s2.id, gone.id, expired.id, randomUUID()];
      assert.deepEqual(await store.matchText(ids, 'code is 559', now), [false, true, null, true, null, false, null]);
      assert.deepEqual(await store.matchText(ids, 'grüße 👋 tail', now), [true, false, null, false, null, false, null], 'UTF-8 and the end of a 30,000-character text');
      assert.deepEqual(await store.matchText([expired.id], 'expired', now), [true]);
      assert.deepEqual(await store.matchText([expired.id], 'expired', now + 10_000), [null], 'gone once expired by now');
      assert.deepEqual(await store.matchText([s1.id.toUpperCase()], '559120', now), [true], 'ids in any case');
      assert.deepEqual(await store.matchText([], 'x', now), []);

      // a message without one gets one once, and keeps the first
      const key = (await store.getEmail(legacy.id, now))!.messageKey;
      await store.putSearchText(key, 'made later');
      assert.deepEqual(await store.matchText([legacy.id], 'made later', now), [true]);
      await store.putSearchText(key, 'made again');
      assert.deepEqual(await store.matchText([legacy.id], 'made', now), [true]);
      assert.deepEqual(await store.matchText([legacy.id], 'again', now), [false], 'an existing search text is never replaced');
      // a freed message stays freed
      const [lone] = await store.addEmails([newEmail(a)]);
      const loneKey = (await store.getEmail(lone.id, now))!.messageKey;
      assert.ok(await store.deleteEmail(lone.id, now));
      await store.putSearchText(loneKey, 'too late');
      assert.equal(await store.readRaw(loneKey), null);
      assert.equal(await store.getViews(loneKey), null);
    });

    withStore('the SMTP envelope is kept with the message (shared by its rows); its verdicts are kept once written; a freed message stays freed', async (store) => {
      const now = Date.now();
      const envelope = { clientIp: '2001:db8::7', helo: 'mta.example.org', mailFrom: 'bounce+x@example.org' };
      const raw = rawMessage('auth');
      const [a, b] = await store.addEmails([newEmail(inbox(), { raw, envelope }), newEmail(inbox(), { raw, envelope: { clientIp: '192.0.2.1', helo: 'other', mailFrom: '' } })]);
      const key = (await store.getEmail(a.id, now))!.messageKey;
      assert.equal((await store.getEmail(b.id, now))!.messageKey, key, 'one message');
      assert.deepEqual(await store.getAuthentication(key), { envelope, verdicts: null }, 'the first row\'s envelope');
      await store.putAuthentication(key, '{"spf":{"result":"pass"}}');
      assert.deepEqual(await store.getAuthentication(key), { envelope, verdicts: '{"spf":{"result":"pass"}}' });
      // the null sender, and a message stored without an envelope
      const [nul] = await store.addEmails([newEmail(inbox(), { envelope: { clientIp: '127.0.0.1', helo: '', mailFrom: '' } })]);
      assert.deepEqual((await store.getAuthentication((await store.getEmail(nul.id, now))!.messageKey))?.envelope, { clientIp: '127.0.0.1', helo: '', mailFrom: '' });
      const [bare] = await store.addEmails([newEmail(inbox())]);
      const bareKey = (await store.getEmail(bare.id, now))!.messageKey;
      assert.deepEqual(await store.getAuthentication(bareKey), { envelope: null, verdicts: null });
      // freed with its last row; writing verdicts afterwards does not bring it back
      assert.ok(await store.deleteEmail(a.id, now));
      assert.notEqual(await store.getAuthentication(key), null, 'still referenced by b');
      assert.ok(await store.deleteEmail(b.id, now));
      assert.equal(await store.getAuthentication(key), null);
      await store.putAuthentication(key, '{}');
      assert.equal(await store.getAuthentication(key), null);
      assert.equal(await store.getAuthentication('no-such-message'), null);
    });

    withStore('lists are per address: newest first, since oldest first, before pages back, limit', async (store) => {
      const a = inbox();
      const other = inbox();
      const now = Date.now();
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) {
        ids.push((await store.addEmails([newEmail(a, { subject: `m${i}` })]))[0].id);
        await store.addEmails([newEmail(other)]);
      }
      increasing(ids, 'sequential adds');
      const newest = await store.listEmails(a, { limit: 100 }, now);
      assert.deepEqual(newest.map((e) => e.id), [...ids].reverse());
      assert.deepEqual(newest.map((e) => e.subject), ['m6', 'm5', 'm4', 'm3', 'm2', 'm1', 'm0']);
      assert.ok(newest.every((e) => e.address === a));
      assert.deepEqual((await store.listEmails(a, { limit: 3 }, now)).map((e) => e.id), [ids[6], ids[5], ids[4]]);
      assert.deepEqual((await store.listEmails(a, { limit: 3, since: ids[2] }, now)).map((e) => e.id), [ids[3], ids[4], ids[5]]);
      assert.deepEqual((await store.listEmails(a, { limit: 100, since: ids[6] }, now)).map((e) => e.id), []);
      assert.deepEqual((await store.listEmails(a, { limit: 2, before: ids[4] }, now)).map((e) => e.id), [ids[3], ids[2]]);
      assert.deepEqual((await store.listEmails(a, { limit: 100, before: ids[0] }, now)).map((e) => e.id), []);
      // cursors are compared by order; they need not name a stored email
      const low = '00000000-0000-7000-8000-000000000000';
      const high = 'ffffffff-ffff-7fff-bfff-ffffffffffff';
      assert.deepEqual((await store.listEmails(a, { limit: 100, since: low }, now)).map((e) => e.id), ids);
      assert.deepEqual((await store.listEmails(a, { limit: 2, before: high }, now)).map((e) => e.id), [ids[6], ids[5]]);
      assert.deepEqual((await store.listEmails(a, { limit: 100, since: ids[3].toUpperCase() }, now)).map((e) => e.id), ids.slice(4));
      assert.deepEqual(await store.listEmails(inbox(), { limit: 10 }, now), []);
      assert.equal(await store.hasEmails(a, now), true);
      assert.equal(await store.hasEmails(inbox(), now), false);
      // advancing `since` to the last item reads every email exactly once
      const seen: string[] = [];
      let cursor = low;
      for (let round = 0; round < 10; round++) {
        const page = await store.listEmails(a, { limit: 2, since: cursor }, now);
        if (page.length === 0) break;
        seen.push(...page.map((e) => e.id));
        cursor = page.at(-1)!.id;
      }
      assert.deepEqual(seen, ids);
    });

    withStore('reads never return an email whose expiresAt <= now', async (store) => {
      const a = inbox();
      const now = Date.now();
      const [short, long, mid] = await store.addEmails([
        newEmail(a, { expiresAt: now + HOUR, subject: 'short' }),
        newEmail(a, { expiresAt: now + 3 * HOUR, subject: 'long' }),
        newEmail(a, { expiresAt: now + 2 * HOUR, subject: 'mid' }),
      ]);
      const at = now + 2 * HOUR; // `mid` expires exactly now: gone
      assert.deepEqual((await store.listEmails(a, { limit: 10 }, at)).map((e) => e.subject), ['long']);
      assert.deepEqual((await store.listEmails(a, { limit: 10, since: '00000000-0000-7000-8000-000000000000' }, at)).map((e) => e.subject), ['long']);
      assert.deepEqual((await store.listEmails(a, { limit: 1 }, now)).map((e) => e.subject), ['mid']);
      assert.deepEqual((await store.listEmails(a, { limit: 1, before: mid.id }, at)).map((e) => e.subject), ['long']);
      assert.equal(await store.getEmail(short.id, at), null);
      assert.equal(await store.getEmail(mid.id, at), null);
      assert.equal((await store.getEmail(long.id, at))?.subject, 'long');
      assert.equal(await store.deleteEmail(mid.id, at), false);
      assert.equal(await store.hasEmails(a, at), true);
      assert.equal(await store.hasEmails(a, now + 3 * HOUR), false);
      assert.deepEqual(await store.listEmails(a, { limit: 10 }, now + 3 * HOUR), []);
      // still there for an earlier `now`: reads filter, they do not rewrite history
      assert.equal((await store.getEmail(short.id, now))?.subject, 'short');
    });

    withStore('deleteEmail removes one live email and its message', async (store) => {
      const a = inbox();
      const now = Date.now();
      const [x, y] = await store.addEmails([newEmail(a, { hasAttachments: true }), newEmail(a)]);
      const key = (await store.getEmail(x.id, now))!.messageKey;
      await store.putViews(key, '{}', [Buffer.from('abc')]);
      assert.equal(await store.deleteEmail(x.id, now), true);
      assert.equal(await store.deleteEmail(x.id, now), false);
      assert.equal(await store.deleteEmail(randomUUID(), now), false);
      assert.equal(await store.getEmail(x.id, now), null);
      assert.equal(await store.readRaw(key), null);
      assert.equal(await store.readPart(key, 0), null);
      assert.deepEqual((await store.listEmails(a, { limit: 10 }, now)).map((e) => e.id), [y.id]);
      assert.equal(await store.deleteEmail(y.id.toUpperCase(), now), true);
      assert.equal(await store.hasEmails(a, now), false);
    });

    withStore('purgeInbox removes every email of the address and counts the live ones', async (store) => {
      const a = inbox();
      const b = inbox();
      const now = Date.now();
      await store.addEmails([newEmail(a), newEmail(a, { expiresAt: now + 10 * 60_000 }), newEmail(a), newEmail(b)]);
      const [withParts] = await store.addEmails([newEmail(a, { hasAttachments: true })]);
      const key = (await store.getEmail(withParts.id, now))!.messageKey;
      await store.putViews(key, '{}', [Buffer.from('x')]);
      const at = now + 20 * 60_000;
      assert.equal(await store.purgeInbox(a, at), 3, 'the expired one is removed but not counted');
      assert.deepEqual(await store.listEmails(a, { limit: 10 }, now), [], 'expired mail is gone too');
      assert.equal(await store.readRaw(key), null, 'messages are freed');
      assert.equal(await store.readPart(key, 0), null);
      assert.equal(await store.purgeInbox(a, at), 0);
      assert.equal(await store.purgeInbox(inbox(), at), 0);
      assert.equal((await store.listEmails(b, { limit: 10 }, now)).length, 1, 'other inboxes untouched');
      const [again] = await store.addEmails([newEmail(a)]);
      assert.deepEqual((await store.listEmails(a, { limit: 10 }, now)).map((e) => e.id), [again.id], 'an inbox is usable after a purge');
    });

    withStore('sweepExpired deletes every email with expiresAt <= now and returns how many', async (store) => {
      const a = inbox();
      const b = inbox();
      const now = Date.now();
      const [gone1, , gone2, keep] = await store.addEmails([
        newEmail(a, { expiresAt: now + HOUR, hasAttachments: true }),
        newEmail(a, { expiresAt: now + 3 * HOUR }),
        newEmail(b, { expiresAt: now + 2 * HOUR }),
        newEmail(b, { expiresAt: now + 3 * HOUR }),
      ]);
      const key = (await store.getEmail(gone1.id, now))!.messageKey;
      await store.putViews(key, '{}', [Buffer.from('x')]);
      const at = now + 2 * HOUR;
      assert.equal(await store.sweepExpired(at), 2);
      assert.equal(await store.sweepExpired(at), 0);
      assert.equal(await store.getEmail(gone1.id, now), null, 'deleted, not just hidden');
      assert.equal(await store.getEmail(gone2.id, now), null);
      assert.equal(await store.readRaw(key), null, 'its message is freed');
      assert.equal(await store.readPart(key, 0), null);
      assert.deepEqual((await store.listEmails(b, { limit: 10 }, now)).map((e) => e.id), [keep.id]);
      assert.equal((await store.listEmails(a, { limit: 10 }, now)).length, 1);
    });

    withStore('ids strictly increase across many concurrent addEmails, in the order they become visible', async (store) => {
      const a = inbox();
      const now = Date.now();
      const order: string[] = [];
      await Promise.all(Array.from({ length: 200 }, (_, i) =>
        store.addEmails([newEmail(a, { subject: String(i) })]).then(([s]) => order.push(s.id))));
      assert.equal(new Set(order).size, 200);
      increasing(order, 'one inbox, completion order');
      const listed = await store.listEmails(a, { limit: 100, since: '00000000-0000-7000-8000-000000000000' }, now);
      assert.deepEqual(listed.map((e) => e.id), order.slice(0, 100));

      // many inboxes at once: within each inbox ids follow completion order (= visibility order)
      const boxes = Array.from({ length: 10 }, () => inbox());
      const all: string[] = [];
      const perBox = new Map<string, string[]>(boxes.map((b) => [b, []]));
      await Promise.all(Array.from({ length: 200 }, (_, i) =>
        store.addEmails([newEmail(boxes[i % 10])]).then(([r]) => {
          all.push(r.id);
          perBox.get(r.address)!.push(r.id);
        })));
      assert.equal(new Set(all).size, 200, 'unique');
      for (const [b, ids] of perBox) {
        increasing(ids, `inbox ${b}`);
        assert.deepEqual((await store.listEmails(b, { limit: 100 }, now)).map((e) => e.id), [...ids].reverse());
      }
      if (store.capabilities.orderedAcrossInboxes) {
        increasing(all, 'across inboxes, completion order');
        assert.ok(all.every((id) => id > order[199]), 'later than every id assigned before');
      }

      // batches of several recipients: unique ids, every copy listed in its inbox
      const batches = await Promise.all(Array.from({ length: 50 }, (_, i) => store.addEmails([boxes[i % 10], boxes[(i + 3) % 10]].map((b) => newEmail(b)))));
      const batchIds = batches.flat().map((r) => r.id);
      assert.equal(new Set(batchIds).size, 100);
      if (store.capabilities.orderedAcrossInboxes) for (const [x, y] of batches) assert.ok(y.id > x.id, 'input order');
      for (const b of boxes) assert.equal((await store.listEmails(b, { limit: 100 }, now)).length, 30);
    });

    withStore('ping answers; close is idempotent', async (store) => {
      await store.ping();
      await store.close();
      await store.close();
    });
  });

  if (harness.cleanup && !harness.skip) {
    it(`${name}: cleanup`, async () => harness.cleanup!());
  }
}
