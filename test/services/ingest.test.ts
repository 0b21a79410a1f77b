// Ingest's choice of where a message is summarized (services/ingest.ts): a small, plainly structured
// message on the event loop, anything else on the pool's `summary` lane; then stored once per
// recipient, and the verdicts scheduled from the bytes in hand. Fake seams; the SMTP path over
// sockets is test/smtp/receiver.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createIngest, FAST_HERE_BYTES } from '../../src/services/ingest.ts';
import type { MessageEnvelope, NewEmail } from '../../src/store/store.ts';

function fakeCore() {
  const lane: string[] = [];
  const added: NewEmail[][] = [];
  const scheduled: string[] = [];
  const core = {
    config: { emailTtlSeconds: 3600, maxAttachmentBytes: 1 << 20, maxAttachments: 10 },
    clock: { now: () => 1_000 },
    log: { warn: () => undefined },
    workers: { summary: { run: async (op: string, raw: Uint8Array) => (lane.push(op), { raw, sender: 'lane', subject: 'lane', hasAttachments: false, searchText: '' }) } },
    store: { addEmails: async (emails: NewEmail[]) => (added.push(emails), emails.map((e, i) => ({ ...e, id: `e${i}`, messageKey: 'k1' }))) },
    webhooks: { addWithEvents: (_emails: unknown, add: () => Promise<unknown>) => add() },
    bus: { publish: async () => undefined },
    authentication: { accepting: true, holds: () => true, scheduleMessage: (key: string) => void scheduled.push(key) },
  };
  return { core, lane, added, scheduled, ingest: createIngest(core as never) };
}

const mail = (body: string, head = 'From: a@x.test\r\nSubject: hi\r\n') => Buffer.from(`${head}\r\n${body}`);
const envelope: MessageEnvelope = { clientIp: '192.0.2.1', helo: 'x.test', mailFrom: 'a@x.test' };

test('a small plain message is summarized here; a large one, or one the fast path cannot read, on the summary lane', async () => {
  const f = fakeCore();
  const small = await f.ingest.receive(mail('hello'), ['a@mail.test', 'b@mail.test', 'a@mail.test'], 'x.test', envelope);
  assert.deepEqual(f.lane, [], 'no worker trip for a small plain message');
  assert.deepEqual(small.map((s) => s.address), ['a@mail.test', 'b@mail.test'], 'stored once per recipient');
  assert.equal(f.added[0][0].subject, 'hi');
  assert.deepEqual(f.scheduled, ['k1'], 'verdicts scheduled from the bytes in hand');

  await f.ingest.receive(mail('x'.repeat(FAST_HERE_BYTES)), ['a@mail.test'], null, envelope);
  assert.deepEqual(f.lane, ['summarize'], 'over FAST_HERE_BYTES: the lane');

  const nested = mail('--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\nx\r\n--b--\r\n', 'From: a@x.test\r\nContent-Type: multipart/mixed; boundary=b\r\n');
  await f.ingest.receive(nested, ['a@mail.test'], null);
  assert.deepEqual(f.lane, ['summarize', 'summarize'], 'not plainly structured: the lane');
  assert.deepEqual(f.scheduled, ['k1', 'k1'], 'no envelope (not over SMTP): no verdicts');
});
