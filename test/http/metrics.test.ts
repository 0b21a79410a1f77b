// GET /metrics, /livez and /readyz (docs/operations.md): counters move on real traffic; probes say
// what is up; EPHEMAIL_METRICS=false switches metrics off.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService();
});
after(() => svc.stop());

const scrape = async () => (await (await svc.api('/metrics')).text());
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : 0;
};

test('counters move on real SMTP and HTTP traffic; /metrics is outside the quota', async () => {
  const before = await scrape();
  await svc.send({ to: ['m1@ephemail.test', 'm2@ephemail.test'], subject: 'metrics', text: 'hello', html: '<p>hello</p>' });
  const [e] = (await (await svc.api('/api/v1/inboxes/m1@ephemail.test/emails')).json()).data;
  assert.equal((await svc.api(`/api/v1/emails/${e.id}`)).status, 200);
  assert.equal((await svc.api('/api/v1/emails/not-an-id')).status, 404);
  const res = await svc.api('/metrics');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  assert.equal(res.headers.get('ratelimit-limit'), null, 'not counted against any quota');
  const after = await res.text();
  assert.equal(value(after, 'ephemail_smtp_messages_accepted_total{recipients="2-10"}') - value(before, 'ephemail_smtp_messages_accepted_total{recipients="2-10"}'), 1, 'one message, stored once');
  assert.ok(value(after, 'ephemail_smtp_received_bytes_total') > value(before, 'ephemail_smtp_received_bytes_total'));
  assert.ok(value(after, 'ephemail_smtp_ack_seconds_count') >= 1);
  assert.equal(value(after, 'ephemail_http_requests_total{method="GET",route="/api/v1/inboxes/:address/emails",status="200"}'), 1, 'by route pattern, never the raw URL');
  assert.equal(value(after, 'ephemail_http_requests_total{method="GET",route="/api/v1/emails/:id",status="404"}'), 1);
  assert.ok(value(after, 'ephemail_derivation_seconds_count{outcome="ok"}') >= 1, 'the first read derived the views');
  assert.ok(value(after, 'ephemail_store_operation_seconds_count{op="addEmails"}') >= 1);
  assert.match(after, /^ephemail_waits_held 0$/m);
});

test('/livez answers while the process runs; /readyz needs the store and the SMTP listener', async () => {
  assert.equal((await svc.api('/livez')).status, 200);
  const ready = await svc.api('/readyz');
  assert.equal(ready.status, 200);
  assert.match(await ready.text(), /^ready/);
  await svc.service.smtp.close();
  const notReady = await svc.api('/readyz');
  assert.equal(notReady.status, 503);
  assert.match(await notReady.text(), /smtp: stopped/);
  assert.equal((await svc.api('/livez')).status, 200, 'still alive');
});

test('EPHEMAIL_METRICS=false: no /metrics', async () => {
  const off = await startService({ EPHEMAIL_METRICS: 'false' }, { mounts: [] });
  try {
    assert.equal((await off.api('/metrics')).status, 404);
    assert.equal((await off.api('/livez')).status, 200);
  } finally {
    await off.stop();
  }
});
