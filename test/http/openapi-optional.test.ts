// The OpenAPI document says optional where the API is optional (generated clients get the right
// types): query parameters with defaults, and request bodies (an absent body counts as {}).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
before(async () => {
  svc = await startService({}, { mounts: [] });
});
after(() => svc.stop());

test('list limit and wait are optional; the bodies of POST /inboxes and POST /keys are optional', async () => {
  const doc = await (await svc.api('/api/v1/openapi.json')).json();
  const list = doc.paths['/api/v1/inboxes/{address}/emails'].get;
  const param = (name: string) => list.parameters.find((p: any) => p.name === name);
  for (const name of ['limit', 'wait', 'since', 'before', 'from', 'subject']) assert.notEqual(param(name).required, true, `${name} is optional`);
  assert.equal(param('limit').schema.default, 25);
  assert.equal(doc.paths['/api/v1/inboxes'].post.requestBody.required, false);
  assert.equal(doc.paths['/api/v1/keys'].post.requestBody.required, false);
  const latest = doc.paths['/api/v1/inboxes/{address}/latest'].get;
  assert.notEqual(latest.parameters.find((p: any) => p.name === 'wait').required, true);
  assert.ok(doc.paths['/api/v1/emails/{id}/raw'], 'the raw endpoint is documented');
  assert.ok(doc.paths['/api/v1/inboxes/{address}/events'], 'the event stream is documented');
  // and the API agrees: no body, no query
  assert.equal((await svc.api('/api/v1/inboxes', { method: 'POST' })).status, 201);
  assert.equal((await svc.api('/api/v1/inboxes/x@ephemail.test/emails')).status, 200);
});
