// GET /api/v1/inboxes/{address}/events: the resumable event stream of new mail, over
// real HTTP with mail sent over real SMTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { expectError, expectSummary } from '../helpers/contract.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { openStream } from '../helpers/sse.ts';
import { until } from '../helpers/time.ts';

describe('event stream', () => {
  let svc: TestService;
  let key: string;
  before(async () => {
    svc = await startService();
    key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
  });
  after(() => svc.stop());
  const auth = () => ({ authorization: `Bearer ${key}` });
  const url = (address: string, q = '') => `${svc.http}/api/v1/inboxes/${address}/events${q}`;
  const mail = (to: string, subject: string) => sendRaw(svc.smtpPort, { from: 'a@sender.example', to: [to], body: message({ From: 'a@sender.example', Subject: subject }, 'x') });

  test('needs a key; a bad address or cursor is refused before streaming', async () => {
    const base = svc.http.replace('127.0.0.1', 'localhost');
    await expectError(await svc.api('/api/v1/inboxes/ev@ephemail.test/events'), 401, 'key_required', base);
    await expectError(await fetch(url('x@gmail.com'), { headers: auth() }), 404, 'not_found', base);
    await expectError(await fetch(url('ev@ephemail.test', '?since=nope'), { headers: auth() }), 400, 'invalid_request', base);
  });

  test('each new email is one `email` event: the summary, with its id as the SSE id', async () => {
    const a = 'live@ephemail.test';
    await mail(a, 'before the stream'); // not replayed without a cursor
    const s = await openStream(url(a), auth());
    assert.equal(s.res.status, 200);
    assert.match(s.res.headers.get('content-type') ?? '', /^text\/event-stream/);
    await s.live(); // the opening comment: from here on no mail is missed
    assert.equal((await mail(a, 'one')).data?.code, 250);
    assert.equal((await mail(a, 'two')).data?.code, 250);
    const evs = await s.until(2);
    assert.deepEqual(evs.map((e) => e.event), ['email', 'email']);
    const data = evs.map((e) => JSON.parse(e.data!));
    for (const d of data) expectSummary(d);
    assert.deepEqual(data.map((d) => d.subject), ['one', 'two']);
    assert.deepEqual(evs.map((e) => e.id), data.map((d) => d.id));
    await s.close();
  });

  test('resumed with Last-Event-ID after mail arrived in the gap: every email exactly once, then live', async () => {
    const a = 'resume@ephemail.test';
    const first = await openStream(url(a), auth());
    await first.live();
    await mail(a, 'm1');
    const [e1] = await first.until(1);
    await first.close();
    for (const sub of ['m2', 'm3', 'm4']) assert.equal((await mail(a, sub)).data?.code, 250); // the gap
    const again = await openStream(url(a), { ...auth(), 'last-event-id': e1.id! });
    await again.until(3);
    await mail(a, 'm5');
    const evs = await again.until(4);
    await new Promise((r) => setTimeout(r, 300)); // quiet window: a duplicate at the seam would arrive in these 300 ms
    assert.deepEqual(again.events.map((e) => JSON.parse(e.data!).subject), ['m2', 'm3', 'm4', 'm5'], 'no gap, no duplicate at the seam');
    assert.equal(new Set(evs.map((e) => e.id)).size, 4);
    await again.close();
    // ?since= does the same as Last-Event-ID
    const viaQuery = await openStream(url(a, `?since=${e1.id}`), auth());
    assert.deepEqual((await viaQuery.until(4)).map((e) => JSON.parse(e.data!).subject), ['m2', 'm3', 'm4', 'm5']);
    await viaQuery.close();
  });

  test('streams count with the key\'s concurrent waits: the sixth is refused with too_many_waiters; closing one frees a slot', async () => {
    const streams = [];
    for (let i = 0; i < 5; i++) {
      const s = await openStream(url(`slot${i}@ephemail.test`), auth());
      assert.equal(s.res.status, 200);
      streams.push(s);
    }
    const base = svc.http.replace('127.0.0.1', 'localhost');
    await expectError(await fetch(url('slot5@ephemail.test'), { headers: auth() }), 429, 'too_many_waiters', base);
    await streams[0].close();
    // observed by opening (every 100 ms at most, as each try is a request of the key)
    await until(async () => {
      const s = await openStream(url('slot5@ephemail.test'), auth());
      await s.close();
      return s.res.status === 200;
    }, 'a slot frees once a stream closes', 5000, 100);
    for (const s of streams.slice(1)) await s.close();
  });
});
