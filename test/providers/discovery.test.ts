// The provider emulations are discoverable without joining /api/v1's contract: GET /api/v1 lists
// their base URLs (additive), and they have an OpenAPI document of their own.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startProviderService, type TestService } from './helpers.ts';

let svc: TestService;
before(async () => {
  svc = await startProviderService();
});
after(() => svc.stop());

test('GET /api/v1 lists each emulation\'s base URL and their document', async () => {
  const { data } = await (await svc.api('/api/v1')).json();
  const base = svc.service.core.baseUrl();
  assert.deepEqual(data.providers, {
    openapi: `${base}/providers/openapi.json`,
    sendgrid: `${base}/providers/sendgrid`,
    ses: `${base}/providers/ses`,
    postmark: `${base}/providers/postmark`,
    resend: `${base}/providers/resend`,
    mailgun: `${base}/providers/mailgun`,
  });
  assert.ok(!data.endpoints.some((e: any) => e.path.startsWith('/providers')), 'not in the /api/v1 endpoint index');
});

test('their own OpenAPI document is valid, names every route, and /api/v1\'s does not', async () => {
  const res = await svc.api('/providers/openapi.json');
  assert.equal(res.status, 200);
  const doc = await res.json();
  const { Validator } = await import('@seriousme/openapi-schema-validator');
  const result = await new Validator().validate(structuredClone(doc));
  assert.equal(result.valid, true, JSON.stringify(result.errors));
  assert.deepEqual(Object.keys(doc.paths).sort(), [
    '/providers/mailgun/v3/{domain}/messages', '/providers/mailgun/v3/{domain}/messages.mime',
    '/providers/postmark/email', '/providers/postmark/email/batch', '/providers/postmark/email/batchWithTemplates', '/providers/postmark/email/withTemplate',
    '/providers/resend/emails', '/providers/resend/emails/batch',
    '/providers/sendgrid/v3/mail/send',
    '/providers/ses/', '/providers/ses/v2/email/outbound-emails',
  ]);
  // every documented route is served (a POST without a body gets the provider's error, not a 404)
  for (const path of Object.keys(doc.paths)) {
    const r = await svc.api(path.replace('{domain}', 'sender.example'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.notEqual(r.status, 404, path);
    assert.ok(r.status >= 400 && r.status < 500, `${path}: ${r.status}`);
  }
  const api = await (await svc.api('/api/v1/openapi.json')).json();
  assert.ok(!Object.keys(api.paths).some((p) => p.startsWith('/providers')));
});

test('an unknown path under a prefix gets the provider\'s own 404', async () => {
  const sg = await svc.api('/providers/sendgrid/v3/nope', { method: 'POST' });
  assert.equal(sg.status, 404);
  assert.ok(Array.isArray((await sg.json()).errors));
  const pm = await svc.api('/providers/postmark/nope');
  assert.equal(pm.status, 404);
  assert.equal(typeof (await pm.json()).ErrorCode, 'number');
});
