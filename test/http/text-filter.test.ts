// The body-text filter of the list and latest endpoints (additive `text`): matches the plain part,
// or an HTML-only mail's text, case-insensitively; combines with from/subject; bounded input. It
// reads the search text, made on the first search that meets a message (not at ingest), and never
// derives views (docs/decisions.md "Body search").
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

/** The count of derivations (views made from a raw message) so far, from /metrics. */
async function derivations(): Promise<number> {
  const text = await (await svc.api('/metrics')).text();
  return text.split('\n').filter((l) => l.startsWith('ephemail_derivation_seconds_count')).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}

test('text= derives nothing: it reads the search text, made on first search (white space as one space), and only a read derives', async () => {
  const box = `noderive${Date.now()}@ephemail.test`;
  for (let i = 0; i < 5; i++) await svc.send({ to: box, subject: `n${i}`, text: `Line one of ${i}\r\n  your CODE\r\n\tis 55912${i}` });
  await svc.send({ to: box, subject: 'html', html: '<p>Sign <b>in</b>&nbsp;here</p>' });
  const before = await derivations();
  const list = async (q: string) => (await (await svc.api(`/api/v1/inboxes/${box}/emails?${q}`)).json()).data.map((e: { subject: string }) => e.subject);
  assert.deepEqual(await list('text=code%20is%20559123'), ['n3'], 'a line break in the mail matches a space in the query');
  assert.deepEqual(await list(`text=${encodeURIComponent('CODE\nIS')}`), ['n4', 'n3', 'n2', 'n1', 'n0']);
  assert.deepEqual(await list('text=sign%20in%20here'), ['html']);
  assert.equal((await (await svc.api(`/api/v1/inboxes/${box}/latest?text=is%20559121`)).json()).data.subject, 'n1', 'latest reads the one it found');
  assert.equal(await derivations(), before + 1, 'the search derived nothing; latest derived the one email it returns');
});

test('mail received and searched at once is found: a word only in the HTML of an HTML-only email, by latest and the list', async () => {
  const box = `fresh${Date.now()}@ephemail.test`;
  const html = '<html><head><style>.x{color:red}</style></head><body><table><tr><td>Your sign-in code</td><td><b>Zephyrine</b>&nbsp;739104</td></tr></table><script>var hidden = "scriptword";</script></body></html>';
  await svc.send({ from: 'auth@example.org', to: box, subject: 'Code', html });
  // no wait between the 250 and the search
  const latest = await (await svc.api(`/api/v1/inboxes/${box}/latest?text=zephyrine%20739104`)).json();
  assert.equal(latest.data?.subject, 'Code', 'found by latest at once');
  const list = async (q: string) => (await (await svc.api(`/api/v1/inboxes/${box}/emails?${q}`)).json()).data.map((e: { subject: string }) => e.subject);
  assert.deepEqual(await list('text=sign-in%20code'), ['Code'], 'and by the list');
  assert.deepEqual(await list('text=scriptword'), [], 'a script is no text');
  assert.deepEqual(await list('text=color'), [], 'nor a stylesheet');
});

test('mail stored without a search text (by an older version, or any mail before its first search): found by the first search', async () => {
  const box = `legacy${Date.now()}@ephemail.test`;
  const now = Date.now();
  const raw = Buffer.from('From: old@example.org\r\nSubject: legacy\r\nContent-Type: text/plain\r\n\r\nThe old code is 424242.\r\n');
  // a row as an older version wrote it: no search text
  await svc.service.core.store.addEmails([{ address: box, sender: 'old@example.org', mailedBy: null, subject: 'legacy', hasAttachments: false, receivedAt: now, expiresAt: now + 600_000, raw }]);
  const before = await derivations();
  const found = async () => (await (await svc.api(`/api/v1/inboxes/${box}/emails?text=old%20code%20is%20424242`)).json()).data.length;
  assert.equal(await found(), 1, 'its search text is made by the search that meets it');
  assert.equal(await found(), 1, 'and kept');
  assert.equal(await derivations(), before, 'making it derived no views');
});
