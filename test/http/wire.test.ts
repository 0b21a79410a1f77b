// The wire mappers: domain objects → the spec's JSON fields, and the ISO formatter they use.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiEmailFace, createIsoFormatter, createSummaryJson, iso, toWireAttachment, toWireEmail, toWireSummary } from '../../src/http/schemas/wire.ts';
import type { Core } from '../../src/services/core.ts';
import type { EmailFull } from '../../src/domain/message.ts';
import type { EmailSummary } from '../../src/domain/summary.ts';

test('the ISO formatter writes exactly what toISOString writes, across days, years and the edges', () => {
  const fast = createIsoFormatter();
  const values = [0, 1, 999, 1000, 86_399_999, 86_400_000, 951_782_400_000 /* 2000-02-29 */, 1_795_573_000_123, 253_402_300_799_999];
  let x = 12345;
  for (let i = 0; i < 20_000; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    values.push(Math.floor((x / 2 ** 31) * 253_402_300_799_999));
  }
  for (const v of values) assert.equal(fast(v), new Date(v).toISOString(), String(v));
  for (const v of [-1, 253_402_300_800_000, 1.5]) assert.equal(fast(v), new Date(v).toISOString(), String(v));
  assert.throws(() => fast(NaN), RangeError);
  assert.equal(iso(1_795_573_000_123), '2026-11-25T02:16:40.123Z');
});

const summary = { id: '019a0000-0000-7000-8000-000000000001', address: 'a@ephemail.test', sender: 'S <s@x.test>', mailedBy: 'x.test', subject: 'Hi', hasAttachments: true, receivedAt: 0, expiresAt: 3_600_000 };

test('toWireSummary names the spec\'s fields', () => {
  assert.deepEqual(toWireSummary(summary), {
    id: summary.id, address: 'a@ephemail.test', sender: 'S <s@x.test>', mailed_by: 'x.test', subject: 'Hi', has_attachments: true,
    received_at: '1970-01-01T00:00:00.000Z', expires_at: '1970-01-01T01:00:00.000Z',
  });
});

test('createSummaryJson answers each summary\'s current fields, however often the same object changes between reads', () => {
  const summaryJson = createSummaryJson((w: unknown) => JSON.stringify(w));
  const e: EmailSummary = { ...summary };
  const expect = (label: string) => assert.deepEqual(JSON.parse(summaryJson(e)), toWireSummary(e), label);
  expect('first read');
  expect('second read, nothing changed');
  // every field, changed in place on the same object (a list page's summary objects are reused)
  const changes: Partial<EmailSummary>[] = [
    { id: '019a0000-0000-7000-8000-000000000002' }, { address: 'b@ephemail.test' }, { sender: 'T <t@y.test>' }, { mailedBy: null },
    { subject: 'Changed' }, { hasAttachments: false }, { receivedAt: 1000 }, { expiresAt: 3_601_000 },
  ];
  for (const change of changes) {
    Object.assign(e, change);
    expect(`after ${Object.keys(change)[0]} changed`);
    expect(`${Object.keys(change)[0]} read again`);
  }
  // a field changed back: the earlier text again
  e.subject = 'Hi';
  expect('subject back');
  // two objects with the same fields answer the same text
  assert.equal(summaryJson({ ...e }), summaryJson(e));
});

test('toWireEmail and toWireAttachment: bodies, links and absolute URLs on the base URL', () => {
  const core = { baseUrl: () => 'https://mail.example' } as unknown as Core;
  const e: EmailFull = {
    ...summary, to: 'a@ephemail.test', cc: '', messageId: '<m@x>', headers: [{ name: 'Subject', value: 'Hi' }], textBody: 'code 123456', htmlBody: null,
    attachments: [{ id: 'a 1', filename: 'f.pdf', contentType: 'application/pdf', sizeBytes: 3, contentId: null }], attachmentsDropped: 1,
    agentBody: { body: 'code 123456', truncated: false }, codes: [], links: [],
  } as unknown as EmailFull;
  const w = toWireEmail(core, e) as Record<string, unknown>;
  assert.equal(w.raw_url, `https://mail.example/api/v1/emails/${summary.id}/raw`);
  assert.equal(w.attachments_dropped, 1);
  assert.equal(w.text_body, 'code 123456');
  assert.equal(w.html_body, null);
  assert.equal('agentBody' in w, false, 'internal fields stay inside');
  assert.deepEqual(toWireAttachment(core, summary.id, e.attachments[0]), {
    id: 'a 1', filename: 'f.pdf', content_type: 'application/pdf', size_bytes: 3, content_id: null,
    download_url: `https://mail.example/api/v1/emails/${summary.id}/attachments/a%201`,
  });
});

test('apiEmailFace renders the 200 body of an email as UTF-8 bytes, exactly its serializer\'s text', () => {
  const core = { baseUrl: () => 'https://mail.example' } as unknown as Core;
  const face = apiEmailFace((b: { data: unknown }) => JSON.stringify(b), core);
  const views = { to: 'a@ephemail.test', cc: '', messageId: null, headers: [], textBody: 'code 123456 ✓', htmlBody: null, attachments: [], attachmentsDropped: 0, agentBody: { body: '', truncated: false }, codes: [], links: [], spam: null, htmlCheck: null, language: null };
  const e = { ...summary, ...views, authentication: null } as unknown as EmailFull;
  const bytes = face.render(e);
  assert.equal(face.name, 'api');
  assert.deepEqual(JSON.parse(bytes.toString('utf8')), { data: toWireEmail(core, e) });
  assert.equal(bytes.byteLength, Buffer.byteLength(JSON.stringify({ data: toWireEmail(core, e) })), 'bytes, not characters');
});
