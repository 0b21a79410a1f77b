// Every response the API gives matches what its own /api/v1/openapi.json declares for that
// operation and status (body schema, declared status, declared headers): the document is the
// contract clients generate code from.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
// Ajv ships with Fastify (its validator); the 2020-12 build matches OpenAPI 3.1 schemas.
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw, message } from '../helpers/smtp.ts';
import { metric } from '../helpers/metrics.ts';
import { until } from '../helpers/time.ts';

const Ajv2020 = (Ajv2020Module as any).default ?? Ajv2020Module;
const addFormats = (addFormatsModule as any).default ?? addFormatsModule;

let svc: TestService;
let doc: any;
let ajv: any;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '3', EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: '1' });
  doc = await (await svc.api('/api/v1/openapi.json')).json();
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ components: doc.components }, 'doc');
});
after(() => svc.stop());

/** Rewrites local refs (#/components/...) to the registered document. */
const rebase = (schema: unknown): unknown => JSON.parse(JSON.stringify(schema).replace(/"\$ref":"#\//g, '"$ref":"doc#/'));

/** The operation of the document that serves this method and concrete path. */
function operationFor(method: string, path: string): any {
  for (const [template, item] of Object.entries(doc.paths) as [string, any][]) {
    const re = new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (re.test(path) && item[method.toLowerCase()]) return item[method.toLowerCase()];
  }
  return null;
}

const checked: string[] = [];
async function conform(method: string, path: string, init: RequestInit = {}): Promise<Response> {
  const res = await svc.api(path, { ...init, method });
  const op = operationFor(method, path.split('?')[0]);
  assert.ok(op, `${method} ${path} is in the document`);
  const declared = op.responses[String(res.status)];
  assert.ok(declared, `${method} ${path}: status ${res.status} is declared (has ${Object.keys(op.responses)})`);
  for (const h of Object.keys(declared.headers ?? {})) {
    if (h === 'retry-after' && res.status !== 429) continue;
    assert.ok(res.headers.has(h), `${method} ${path} ${res.status}: declared header ${h} present`);
  }
  const content = declared.content ?? {};
  const json = content['application/json'];
  if (json?.schema) {
    const body = await res.clone().json();
    const validate = ajv.compile(rebase(json.schema));
    assert.ok(validate(body), `${method} ${path} ${res.status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 500)}`);
  } else if (res.status === 204) {
    assert.equal(await res.clone().text(), '');
  }
  checked.push(`${method} ${op.operationId} ${res.status}`);
  return res;
}

test('every operation and every status the tests reach matches the document', async () => {
  const keyRes = await conform('POST', '/api/v1/keys', { headers: { 'content-type': 'application/json' }, body: '{"label":"schema"}' });
  const key = (await keyRes.json()).data.api_key;
  const K = { authorization: `Bearer ${key}` };
  await conform('GET', '/api/v1');
  await conform('GET', '/api/v1/openapi.json');
  await conform('GET', '/api/v1/health');
  await conform('GET', '/api/v1/me');
  await conform('GET', '/api/v1/me', { headers: K });
  await conform('GET', '/api/v1/me', { headers: { 'x-api-key': 'eph_bad' } });
  await conform('GET', '/api/v1/domains', { headers: K });
  await conform('POST', '/api/v1/inboxes', { headers: K });
  await conform('POST', '/api/v1/inboxes', { headers: { ...K, 'content-type': 'application/json' }, body: '{"domain":"nope.example"}' });
  const r = await sendRaw(svc.smtpPort, {
    from: 'a@example.org', to: ['schema@ephemail.test'],
    body: message({ From: 'a@example.org', Subject: 's', 'Content-Type': 'multipart/mixed; boundary=b' }, '--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b\r\nContent-Type: application/pdf; name=x.pdf\r\nContent-Disposition: attachment; filename=x.pdf\r\n\r\n%PDF\r\n--b--\r\n'),
  });
  assert.equal(r.data?.code, 250);
  await conform('POST', '/api/v1/inboxes', { headers: { ...K, 'content-type': 'application/json' }, body: '{"local_part":"schema"}' });
  const list = await conform('GET', '/api/v1/inboxes/schema%40ephemail.test/emails', { headers: K });
  const id = (await list.json()).data[0].id;
  await conform('GET', '/api/v1/inboxes/not-an-address/emails', { headers: K });
  await conform('GET', '/api/v1/inboxes/x%40gmail.com/emails', { headers: K });
  await conform('GET', `/api/v1/emails/${id}`, { headers: K });
  await conform('GET', `/api/v1/emails/${id}/attachments`, { headers: K });
  const dl = await svc.api(`/api/v1/emails/${id}/attachments/1`, { headers: K });
  assert.equal(dl.status, 200);
  assert.ok(operationFor('GET', `/api/v1/emails/${id}/attachments/1`).responses['200']);
  await conform('GET', `/api/v1/emails/${id}/attachments/9`, { headers: K });
  await conform('GET', '/api/v1/emails/019a0000-0000-7000-8000-000000000000', { headers: K });
  // key_required, too_many_waiters
  await conform('GET', '/api/v1/inboxes/w%40ephemail.test/emails?wait=2');
  const held = svc.api('/api/v1/inboxes/w%40ephemail.test/emails?wait=2', { headers: K });
  await until(async () => (await metric(svc.http, 'ephemail_waits_held')) === 1, 'the first wait is held');
  await conform('GET', '/api/v1/inboxes/w%40ephemail.test/emails?wait=2', { headers: K });
  await (await held).arrayBuffer();
  await conform('DELETE', `/api/v1/emails/${id}`, { headers: K });
  await conform('DELETE', `/api/v1/emails/${id}`, { headers: K });
  await conform('DELETE', '/api/v1/inboxes/schema%40ephemail.test/emails', { headers: K });
  // anonymous limit of 3 a minute: go on until it answers rate_limited
  let limited: Response | null = null;
  for (let i = 0; i < 10 && limited?.status !== 429; i++) limited = await conform('GET', '/api/v1/domains');
  assert.equal(limited?.status, 429);
  for (const t of ['201', '200', '204', '400', '401', '404', '409', '429']) assert.ok(checked.some((c) => c.endsWith(` ${t}`)), `reached a ${t}`);
});
