// The views of an email as its faces show them (derive/registry.ts `wire`): the API's email JSON
// (GET /api/v1/emails/{id}, `latest`) and MCP read_email. Each face shows exactly the views whose entry
// names it, under the entry's field, with a value its published schema (the OpenAPI document, the
// tool's outputSchema) accepts; behaviour, not a list of names, is what is checked.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import AjvModule from 'ajv';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { EMAIL_VIEWS } from '../../src/derive/registry.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { callRaw } from '../mcp/helpers.ts';

const Ajv = (AjvModule as any).default ?? AjvModule;
const Ajv2020 = (Ajv2020Module as any).default ?? Ajv2020Module;
const addFormats = (addFormatsModule as any).default ?? addFormatsModule;

let svc: TestService;
let id: string;
const address = 'faces@ephemail.test';
before(async () => {
  svc = await startService();
  await svc.send({
    to: address, from: 'Shop <news@shop.example>', subject: 'Votre code',
    text: 'Bonjour, votre code de vérification est 559 120. Il expire dans dix minutes. Merci de votre confiance et à bientôt sur notre site.',
    html: '<p>Bonjour, votre code de vérification est <b>559 120</b>.</p><p><a href="https://shop.example/verify?t=1">Vérifier mon adresse</a></p>',
  });
  const list = await (await svc.api(`/api/v1/inboxes/${address}/emails`)).json();
  id = list.data[0].id;
});
after(() => svc.stop());

const shownOn = (face: 'http' | 'mcp') => EMAIL_VIEWS.filter((v) => v.wire?.faces.includes(face));

test('the API\'s email JSON has each view its entry shows there, under its field, valid against the published OpenAPI schema', async () => {
  const doc = await (await svc.api('/api/v1/openapi.json')).json();
  const email = (await (await svc.api(`/api/v1/emails/${id}`)).json()).data;
  for (const v of shownOn('http')) assert.ok(v.wire!.field in email, `${v.name} is shown as ${v.wire!.field}`);
  for (const v of EMAIL_VIEWS) if (!v.wire?.faces.includes('http')) assert.ok(!(v.name in email) && !(v.wire && v.wire.field in email), `${v.name} is not on the API`);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema as object, `#/components/schemas/${name}`);
  const valid = ajv.validate({ $ref: '#/components/schemas/Email' }, email);
  assert.ok(valid, JSON.stringify(ajv.errors));
  // what the views say, as a user reads them
  assert.deepEqual(email.codes.map((c: { value: string }) => c.value), ['559120']);
  assert.equal(email.links[0].url, 'https://shop.example/verify?t=1');
  const latest = (await (await svc.api(`/api/v1/inboxes/${address}/latest`)).json()).data;
  assert.deepEqual(Object.keys(latest).sort(), Object.keys(email).sort(), 'latest shows the same fields');
});

test('read_email has each view its entry shows there, and its result is valid against its published outputSchema', async () => {
  const tools = (await (await fetch(`${svc.http}/mcp`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  })).json()).result.tools;
  const outputSchema = tools.find((t: { name: string }) => t.name === 'read_email').outputSchema;
  const res = await callRaw(svc, 'read_email', { email_id: id });
  const out = res.result.structuredContent;
  assert.equal(res.result.isError, undefined);
  for (const v of shownOn('mcp')) {
    // read_email may write a view as more than one field (agentBody: body and body_truncated); the entry's field is one
    assert.ok(v.wire!.field in out, `${v.name} is shown as ${v.wire!.field}`);
    assert.ok(v.wire!.field in outputSchema.properties, `${v.wire!.field} is in the published schema`);
  }
  for (const v of EMAIL_VIEWS) if (v.wire && !v.wire.faces.includes('mcp')) assert.ok(!(v.wire.field in out), `${v.name} is not in read_email`);
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  assert.ok(ajv.validate(outputSchema, out), JSON.stringify(ajv.errors));
  assert.deepEqual(Object.keys(out).sort(), Object.keys(outputSchema.properties).sort(), 'every published field is there, and nothing else');
  assert.equal(out.codes[0].value, '559120');
});

test('language: the body\'s language on both faces, and latest filters on it', async () => {
  const inbox = 'langs@ephemail.test';
  await svc.send({ to: inbox, from: 'a@shop.example', subject: 'Votre commande', text: 'Bonjour, votre commande a bien été expédiée. Vous la recevrez dans trois jours ouvrés. Merci de votre confiance.' });
  await svc.send({ to: inbox, from: 'a@shop.example', subject: 'Your order', text: 'Hello, your order has shipped and should arrive within three working days. Thank you for shopping with us.' });
  await svc.send({ to: inbox, from: 'a@shop.example', subject: 'Code', text: 'Code: 559120' });
  const fr = (await (await svc.api(`/api/v1/inboxes/${inbox}/latest?language=fr`)).json()).data;
  assert.equal(fr.subject, 'Votre commande');
  assert.equal(fr.language, 'fr');
  const en = (await (await svc.api(`/api/v1/inboxes/${inbox}/latest?language=EN`)).json()).data;
  assert.equal(en.subject, 'Your order', 'case-insensitive');
  assert.equal((await (await svc.api(`/api/v1/inboxes/${inbox}/latest?language=de`)).json()).data, null, 'none in German');
  const newest = (await (await svc.api(`/api/v1/inboxes/${inbox}/latest`)).json()).data;
  assert.equal(newest.language, null, 'too short to tell');
  const read = (await callRaw(svc, 'read_email', { email_id: fr.id })).result.structuredContent;
  assert.equal(read.language, 'fr');
});
