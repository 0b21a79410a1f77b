// /api/v1/openapi.json and /docs (spec: Versioning, Errors; docs/contract-decisions.md "Docs links").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let doc: any;
before(async () => {
  svc = await startService();
  const res = await svc.api('/api/v1/openapi.json');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  doc = await res.json();
});
after(() => svc.stop());

const ERROR_TYPES = ['invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded', 'too_many_waiters', 'internal_error'];
const ENDPOINTS: [string, string][] = [
  ['get', '/api/v1'], ['get', '/api/v1/openapi.json'], ['get', '/api/v1/health'], ['post', '/api/v1/keys'], ['get', '/api/v1/me'],
  ['get', '/api/v1/domains'], ['post', '/api/v1/inboxes'], ['get', '/api/v1/inboxes/{address}/emails'], ['delete', '/api/v1/inboxes/{address}/emails'],
  ['get', '/api/v1/emails/{id}'], ['delete', '/api/v1/emails/{id}'], ['get', '/api/v1/emails/{id}/attachments'],
  ['get', '/api/v1/emails/{id}/attachments/{attachment_id}'],
];

/** Resolves a local $ref. */
const deref = (o: any): any => {
  if (!o?.$ref) return o;
  const parts = String(o.$ref).replace(/^#\//, '').split('/');
  let cur = doc;
  for (const p of parts) cur = cur?.[p];
  assert.ok(cur, `$ref ${o.$ref} resolves`);
  return deref(cur);
};

test('declares OpenAPI 3.1.x and contract version 1.0.0', () => {
  assert.match(doc.openapi, /^3\.1\.\d+$/);
  assert.equal(doc.info.version, '1.0.0');
  assert.equal(typeof doc.info.title, 'string');
});

test('every endpoint path and method, with operationIds and responses', () => {
  for (const [method, path] of ENDPOINTS) {
    const op = doc.paths?.[path]?.[method];
    assert.ok(op, `${method.toUpperCase()} ${path} in the document`);
    assert.ok(op.responses && Object.keys(op.responses).length > 0, `${method} ${path} has responses`);
  }
  const ids = ENDPOINTS.map(([m, p]) => doc.paths[p][m].operationId);
  assert.equal(new Set(ids).size, ids.length, 'operationIds unique');
  // path parameters declared
  for (const [method, path] of ENDPOINTS) {
    const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const params = [...(doc.paths[path].parameters ?? []), ...(doc.paths[path][method].parameters ?? [])].map(deref);
    for (const n of names) assert.ok(params.some((p: any) => p.in === 'path' && p.name === n && p.required === true), `${path} declares path param ${n}`);
  }
  assert.ok(!doc.paths['/mcp'] || true);
});

test('list query parameters with their bounds', () => {
  const params = doc.paths['/api/v1/inboxes/{address}/emails'].get.parameters.map(deref);
  const byName = Object.fromEntries(params.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p.schema]));
  assert.deepEqual([byName.limit.minimum, byName.limit.maximum, byName.limit.default], [1, 100, 25]);
  assert.deepEqual([byName.wait.minimum, byName.wait.maximum, byName.wait.default], [0, 30, 0]);
  assert.ok(byName.since && byName.before);
});

test('every error type is declared, with its status', () => {
  // the envelope's type is exactly the spec's types plus the added ones, each with its meaning
  const envelope = deref(doc.components.schemas.Error);
  const typeSchema = deref(envelope.properties.error).properties.type;
  const declared = (typeSchema.anyOf ?? typeSchema.oneOf).map((v: any) => v.const ?? v.enum?.[0]);
  assert.deepEqual([...declared].sort(), [...ERROR_TYPES, 'address_in_use', 'forbidden', 'too_many_webhooks', 'conflict'].sort());
  for (const v of typeSchema.anyOf ?? typeSchema.oneOf) assert.ok(typeof v.description === 'string' && v.description.length > 10, `${v.const ?? v.enum?.[0]} has a meaning`);
  const statuses = new Set<string>();
  for (const item of Object.values(doc.paths) as any[]) for (const op of Object.values(item) as any[]) for (const s of Object.keys(op.responses ?? {})) statuses.add(s);
  for (const s of ['400', '401', '404', '429', '500']) assert.ok(statuses.has(s), `status ${s} documented`);
  const list = doc.paths['/api/v1/inboxes/{address}/emails'].get.responses;
  for (const s of ['200', '400', '401', '404', '429']) assert.ok(list[s], `list documents ${s}`);
  // each error type's status where the spec puts it: the route can answer it, so it declares it
  // (400 on every route: any request can be refused as malformed before its route looks; test/http/openapi-wire.test.ts)
  const where: [string, string, string[]][] = [
    ['post', '/api/v1/keys', ['400', '401', '429', '500']],
    ['post', '/api/v1/inboxes', ['400', '401', '409', '429', '500']],
    ['get', '/api/v1/inboxes/{address}/emails', ['400', '401', '404', '429', '500']],
    ['delete', '/api/v1/inboxes/{address}/emails', ['400', '401', '404', '429', '500']],
    ['get', '/api/v1/emails/{id}', ['400', '401', '404', '429', '500']],
    ['delete', '/api/v1/emails/{id}', ['400', '401', '404', '429', '500']],
    ['get', '/api/v1/emails/{id}/attachments/{attachment_id}', ['400', '401', '404', '429', '500']],
    // 403 forbidden: a *@<domain> webhook where the operator has not allowed it (docs/push.md)
    ['post', '/api/v1/webhooks', ['400', '401', '403', '409', '429', '500']],
  ];
  for (const [method, path, statuses] of where) {
    const declared = Object.keys(doc.paths[path][method].responses).filter((x) => x !== '200' && x !== '201' && x !== '204');
    assert.deepEqual(declared.sort(), statuses, `${method.toUpperCase()} ${path}`);
  }
  const err = deref(list['429'].content['application/json'].schema);
  assert.ok(err.properties?.error, 'error envelope schema');
  const inner = deref(err.properties.error);
  assert.deepEqual(Object.keys(inner.properties).sort(), ['docs', 'message', 'type']);
});

test('the ratelimit headers are declared on responses; retry-after on 429', () => {
  for (const [method, path] of ENDPOINTS) {
    for (const [status, res] of Object.entries(doc.paths[path][method].responses) as [string, any][]) {
      for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
        assert.ok(res.headers?.[h], `${method} ${path} ${status} declares ${h}`);
        assert.ok(deref(res.headers[h]).schema, `${h} has a schema`);
      }
      if (status === '429') assert.ok(res.headers['retry-after'], `${method} ${path} 429 declares retry-after`);
    }
  }
});

test('response schemas name the spec fields', () => {
  const email = deref(doc.paths['/api/v1/emails/{id}'].get.responses['200'].content['application/json'].schema);
  const data = deref(email.properties.data);
  for (const f of ['id', 'address', 'sender', 'mailed_by', 'subject', 'has_attachments', 'received_at', 'expires_at', 'text_body', 'html_body', 'attachments']) {
    assert.ok(data.properties[f], `Email.${f}`);
  }
  const key = deref(deref(doc.paths['/api/v1/keys'].post.responses['201'].content['application/json'].schema).properties.data);
  for (const f of ['api_key', 'key_prefix', 'label', 'tier', 'limits', 'created_at', 'warning']) assert.ok(key.properties[f], `ApiKey.${f}`);
  const body = deref(doc.paths['/api/v1/keys'].post.requestBody.content['application/json'].schema);
  assert.equal(body.properties.label.maxLength, 100);
  assert.equal(body.properties.contact_email.maxLength, 254);
});

test('every $ref resolves', () => {
  const walk = (o: any) => {
    if (!o || typeof o !== 'object') return;
    if (typeof o.$ref === 'string') deref(o);
    for (const v of Object.values(o)) walk(v);
  };
  walk(doc);
});

test('/docs is HTML with an anchor id="error-<type>" for every error type', async () => {
  const res = await svc.api('/docs');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  const html = await res.text();
  for (const t of [...ERROR_TYPES, 'address_in_use']) assert.ok(html.includes(`id="error-${t}"`), `anchor for ${t}`);
  for (const [, path] of ENDPOINTS) assert.ok(html.includes(path), `docs mention ${path}`);
});

test('an error docs link lands on an existing anchor', async () => {
  const err = await (await svc.api('/api/v1/emails/nope')).json();
  const url = new URL(err.error.docs);
  assert.equal(url.pathname, '/docs');
  const html = await (await svc.api('/docs')).text();
  assert.ok(html.includes(`id="${url.hash.slice(1)}"`));
});

// A real OpenAPI 3.1 validator (devDependency @seriousme/openapi-schema-validator).
test('the document passes an OpenAPI 3.1 validator', async () => {
  const { Validator } = await import('@seriousme/openapi-schema-validator');
  const v = new Validator();
  const result = await v.validate(structuredClone(doc));
  assert.equal(v.version, '3.1');
  assert.deepEqual(result, { valid: true });
});
