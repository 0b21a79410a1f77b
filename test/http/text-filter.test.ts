// The body-text filter of the list and latest endpoints (additive `text`): matches the plain part,
// or an HTML-only mail's text, case-insensitively; combines with from/subject; bounded input.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/contract.ts';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService();
});
after(() => svc.stop());

test('text= narrows the list and latest by body text, plain or HTML-only', async () => {
  const box = `body${Date.now()}@ephemail.test`;
  await svc.send({ from: 'shop@example.org', to: box, subject: 'Order', text: 'Your parcel ships Tuesday.' });
  await svc.send({ from: 'bank@example.org', to: box, subject: 'Statement', html: '<p>Your <b>Quarterly Statement</b> is ready.</p>' });
  await svc.send({ from: 'shop@example.org', to: box, subject: 'Receipt', text: 'Thanks for the parcel order.' });
  const list = async (q: string) => (await (await svc.api(`/api/v1/inboxes/${box}/emails?${q}`)).json()).data.map((e: { subject: string }) => e.subject);
  assert.deepEqual(await list('text=PARCEL'), ['Receipt', 'Order']);
  assert.deepEqual(await list('text=quarterly%20statement'), ['Statement'], 'an HTML-only body is searched as text');
  assert.deepEqual(await list('text=parcel&subject=order'), ['Order']);
  assert.deepEqual(await list('text=parcel&from=bank'), []);
  assert.deepEqual(await list('text=nowhere'), []);
  const latest = await (await svc.api(`/api/v1/inboxes/${box}/latest?text=ships`)).json();
  assert.equal(latest.data.subject, 'Order');
  const base = svc.http.replace('127.0.0.1', 'localhost');
  await expectError(await svc.api(`/api/v1/inboxes/${box}/emails?text=${'x'.repeat(201)}`), 400, 'invalid_request', base);
});
