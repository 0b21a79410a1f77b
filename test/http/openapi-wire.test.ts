// The OpenAPI document is true to the wire (issue 35 finding 13): every answer a real ephemail gives,
// to real traffic on every operation and to generated bad inputs, is one its /api/v1/openapi.json
// describes for that operation: the status is declared, the media type is one of that status's, and
// the body (JSON) matches its schema. Checked by Prism, a validating proxy (test/helpers/wire-proxy.ts;
// docs/decisions.md "The OpenAPI wire check"), over real sockets: test → Prism → relay → ephemail.
// A last test shows the proxy does find an answer the document does not describe.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { parseViolations, startWireProxy, type Violation, type WireAnswer, type WireProxy } from '../helpers/wire-proxy.ts';

const ADMIN_TOKEN = 'wire-admin-token-0123456789abcdefghijklmnop';
const DOMAIN = 'ephemail.test';
const INBOX = `wire@${DOMAIN}`;

interface Operation { method: string; template: string; id: string; query: string[]; hasBody: boolean; admin: boolean }
interface Exchange { label: string; status: number; contentType: string | null; answer: WireAnswer | undefined; violations: Violation[]; json: any }
interface Send { headers?: Record<string, string>; body?: string; asType?: string; sseBlocks?: number }

const dir = mkdtempSync(join(tmpdir(), 'ephemail-wire-'));
const ctx = {
  served: undefined as unknown as Served,
  proxy: undefined as unknown as WireProxy,
  /** the webhooks' receiver, on loopback (EPHEMAIL_WEBHOOK_ALLOW_PRIVATE) */
  receiver: undefined as unknown as Receiver,
  doc: undefined as any,
  ops: [] as Operation[],
  seq: 0,
  /** operationId → statuses answered through the proxy */
  seen: new Map<string, Set<number>>(),
  /** what the real traffic made: ids to name in paths */
  key: '',
  emailId: '',
  attachmentId: '',
  webhookId: '',
};

before(async () => {
  ctx.receiver = await startReceiver(() => 200);
  ctx.served = await spawnServe({
    EPHEMAIL_STORE: 'sqlite::memory:',
    EPHEMAIL_DOMAINS: DOMAIN,
    EPHEMAIL_ADMIN_TOKEN: ADMIN_TOKEN,
    // the key's traffic never runs out; the anonymous bucket does, part way through the generated requests
    // (from then on their anonymous half is answered 429: described too)
    EPHEMAIL_LIMIT_KEY_PER_MINUTE: '1000000',
    EPHEMAIL_LIMIT_KEY_PER_DAY: '10000000',
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '200',
    EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: '1',
    EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '4',
    // a webhook calls the receiver on loopback (a registration looks its host up: nothing else resolves here)
    EPHEMAIL_WEBHOOK_ALLOW_PRIVATE: 'true',
    EPHEMAIL_LOG_LEVEL: 'info',
  }, { name: 'ephemail (wire)' });
  ctx.doc = await (await fetch(`${ctx.served.http}/api/v1/openapi.json`)).json();
  for (const [template, item] of Object.entries(ctx.doc.paths) as [string, Record<string, any>][]) {
    for (const [method, op] of Object.entries(item)) {
      ctx.ops.push({
        method: method.toUpperCase(), template, id: op.operationId,
        query: (op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name),
        hasBody: Boolean(op.requestBody), admin: (op.tags ?? []).includes('admin'),
      });
    }
  }
  const file = join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(ctx.doc));
  ctx.proxy = await startWireProxy(file, ctx.served.http);
});

after(async () => {
  await ctx.proxy?.close();
  ctx.served?.child.kill('SIGKILL');
  await ctx.receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The operation of the document that a method and concrete path name (for the coverage count). */
function operationOf(method: string, path: string): Operation | undefined {
  const p = path.split('?')[0];
  return ctx.ops.find((o) => o.method === method && new RegExp(`^${o.template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(p));
}

/** One request through Prism; returns the answer and what Prism found. */
async function send(method: string, path: string, s: Send = {}, via: WireProxy = ctx.proxy): Promise<Exchange> {
  const id = `w${++ctx.seq}`;
  const headers: Record<string, string> = { 'x-wire-id': id, ...s.headers };
  if (s.asType !== undefined) {
    // Prism would parse (and refuse) a malformed JSON body: it carries the body as text, the relay restores the type
    headers['content-type'] = 'text/plain';
    headers['x-wire-content-type'] = s.asType;
  }
  // an event stream that opens is cut after its first block (else Prism would wait for its end)
  const blocks = s.sseBlocks ?? (method === 'GET' && /^\/api\/v1\/inboxes\/[^/]*\/events(?:\?|$)/.test(path) ? 1 : 0);
  if (blocks) headers['x-wire-sse-blocks'] = String(blocks);
  const res = await fetch(`${via.url}${path}`, { method, headers, body: s.body, redirect: 'manual' });
  const body = Buffer.from(await res.arrayBuffer());
  const answer = via.answer(id);
  let json: any;
  if (/json/.test(res.headers.get('content-type') ?? '')) {
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      json = undefined;
    }
  }
  return { label: `${method} ${path.length > 160 ? `${path.slice(0, 160)}…(${path.length})` : path}`, status: res.status, contentType: res.headers.get('content-type'), answer, violations: parseViolations(res.headers.get('sl-violations')), json };
}

/** What is wrong with an exchange, as far as the document goes ([] when it is described). */
function problems(ex: Exchange, method: string, path: string): string[] {
  const out: string[] = [];
  if (!ex.answer) return [`${ex.label}: the service never answered (Prism said ${ex.status}: ${JSON.stringify(ex.json)?.slice(0, 300)})`];
  // Prism passes the service's status on; one of its own (an answer it could not read) was never checked
  if (ex.status !== ex.answer.status) return [`${ex.label}: the service answered ${ex.answer.status}, Prism ${ex.status} (${ex.contentType}): ${JSON.stringify(ex.json)?.slice(0, 300)}`];
  const op = operationOf(method, path);
  if (!op) out.push(`${ex.label}: names no operation of the document`);
  for (const v of ex.violations) {
    // request-side findings are expected (bad inputs); Prism's "route not found" is not, for an operation's path
    if (v.location[0] === 'response' || /route not found/i.test(v.message)) out.push(`${ex.label} → ${ex.answer.status}: ${v.location.join('.')} ${v.message}`);
  }
  // what Prism does not look at: a status declared without content answers no body
  const declared = op && ctx.doc.paths[op.template][method.toLowerCase()].responses[String(ex.answer.status)];
  if (declared && !declared.content && ex.answer.body.length > 0) out.push(`${ex.label} → ${ex.answer.status}: a body (${ex.answer.headers['content-type']}) where the document declares none`);
  if (op) {
    const statuses = ctx.seen.get(op.id) ?? new Set<number>();
    statuses.add(ex.answer.status);
    ctx.seen.set(op.id, statuses);
  }
  return out;
}

/** Sends and asserts the answer is described; returns it. */
async function conform(method: string, path: string, s: Send = {}, expect?: number): Promise<Exchange> {
  const ex = await send(method, path, s);
  assert.deepEqual(problems(ex, method, path), [], 'the answer is described by the document');
  if (expect !== undefined) assert.equal(ex.answer!.status, expect, `${ex.label}: ${ex.answer!.body.toString('utf8').slice(0, 300)}`);
  return ex;
}

const enc = encodeURIComponent;
/** Generated requests per kind (EPHEMAIL_WIRE_RUNS for a longer hunt). */
const RUNS = Number(process.env.EPHEMAIL_WIRE_RUNS ?? 250);
const JSON_TYPE = { 'content-type': 'application/json' };

test('real traffic on every operation is described by the document', async () => {
  const doc = ctx.doc;
  assert.ok(ctx.ops.length >= 30, `the document has its operations, the admin API's too (${ctx.ops.length})`);
  // keys and identity
  const k1 = await conform('POST', '/api/v1/keys', { headers: JSON_TYPE, body: JSON.stringify({ label: 'wire' }) }, 201);
  ctx.key = k1.json.data.api_key;
  const K = { authorization: `Bearer ${ctx.key}` };
  const k2 = await conform('POST', '/api/v1/keys', { headers: JSON_TYPE, body: '{"label":"to revoke","contact_email":"x@example.org"}' }, 201);
  const revoked = k2.json.data.api_key as string;
  await conform('POST', '/api/v1/keys', { headers: JSON_TYPE, body: '{"label":5}' }, 400);
  await conform('GET', '/api/v1', {}, 200);
  await conform('GET', '/api/v1/health', {}, 200);
  await conform('GET', '/api/v1/openapi.json', { headers: K }, 200);
  await conform('GET', '/api/v1/me', {}, 200);
  await conform('GET', '/api/v1/me', { headers: { 'x-api-key': ctx.key } }, 200);
  await conform('GET', '/api/v1/me', { headers: { 'x-api-key': 'eph_nope' } }, 401);
  await conform('GET', '/api/v1/domains', { headers: K }, 200);
  // inboxes
  await conform('POST', '/api/v1/inboxes', { headers: K }, 201);
  await conform('POST', '/api/v1/inboxes', { headers: { ...K, ...JSON_TYPE }, body: JSON.stringify({ domain: DOMAIN, local_part: 'fresh.one' }) }, 201);
  await conform('POST', '/api/v1/inboxes', { headers: { ...K, ...JSON_TYPE }, body: '{"domain":"nope.example"}' }, 400);
  await conform('POST', '/api/v1/webhooks', { headers: { ...K, ...JSON_TYPE }, body: JSON.stringify({ url: `${ctx.receiver.url}/in`, address: INBOX }) }, 201)
    .then((ex) => (ctx.webhookId = ex.json.data.id));
  // mail, over SMTP: a plain one, one with a PDF attachment, one to delete
  const mixed = '--b\r\nContent-Type: text/plain\r\n\r\nYour code is 482913\r\n--b\r\nContent-Type: application/pdf; name=x.pdf\r\nContent-Disposition: attachment; filename=x.pdf\r\n\r\n%PDF-1.4 wire\r\n--b--\r\n';
  for (const [to, headers, body] of [
    [INBOX, { From: 'a@example.org', Subject: 'plain' }, 'hello https://example.org/verify?t=1'],
    [INBOX, { From: 'b@example.org', Subject: 'with attachment', 'MIME-Version': '1.0', 'Content-Type': 'multipart/mixed; boundary=b' }, mixed],
    [`purge@${DOMAIN}`, { From: 'c@example.org', Subject: 'to purge' }, 'bye'],
  ] as const) {
    const r = await sendRaw(ctx.served.smtpPort, { from: 'sender@example.org', to: [to], body: message(headers, body) });
    assert.equal(r.data?.code, 250, JSON.stringify(r));
  }
  await conform('POST', '/api/v1/inboxes', { headers: { ...K, ...JSON_TYPE }, body: '{"local_part":"wire"}' }, 409);
  const list = await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?limit=10`, { headers: K }, 200);
  assert.equal(list.json.data.length, 2);
  const [newest, oldest] = list.json.data as { id: string; has_attachments: boolean }[];
  ctx.emailId = (newest.has_attachments ? newest : oldest).id;
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?since=${oldest.id}&subject=with`, {}, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?before=${newest.id}&limit=1`, {}, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?wait=1`, { headers: K }, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?wait=1`, {}, 401);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/emails?limit=0`, {}, 400);
  await conform('GET', `/api/v1/inboxes/not-an-address/emails`, {}, 400);
  await conform('GET', `/api/v1/inboxes/${enc('x@other.example')}/emails`, {}, 404);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/latest?from=b%40example`, {}, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/latest?since=${newest.id}&wait=1`, { headers: K }, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/previews?ids=${newest.id},${oldest.id},nope`, {}, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/previews`, {}, 400);
  // one email, its parts
  const full = await conform('GET', `/api/v1/emails/${ctx.emailId}`, {}, 200);
  ctx.attachmentId = full.json.data.attachments[0].id;
  await conform('GET', `/api/v1/emails/${ctx.emailId}/attachments`, {}, 200);
  await conform('GET', `/api/v1/emails/${ctx.emailId}/attachments/${ctx.attachmentId}`, {}, 200);
  await conform('GET', `/api/v1/emails/${ctx.emailId}/attachments/nope`, {}, 404);
  await conform('GET', `/api/v1/emails/${ctx.emailId}/raw`, {}, 200);
  await conform('GET', '/api/v1/emails/0190a0a0-0000-7000-8000-000000000000', {}, 404);
  await conform('GET', '/api/v1/emails/0190a0a0-0000-7000-8000-000000000000/raw', {}, 404);
  // the event stream: its first blocks (the retry hint, then the replayed email)
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/events?since=${oldest.id}`, { headers: K, sseBlocks: 2 }, 200);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/events`, {}, 401);
  await conform('GET', `/api/v1/inboxes/${enc(INBOX)}/events?since=nope`, { headers: K }, 400);
  // one wait slot: of two waits at once on an empty inbox, one is held (200 after 2 s), the other refused (429)
  const empty = enc(`empty@${DOMAIN}`);
  const both = await Promise.all([
    conform('GET', `/api/v1/inboxes/${empty}/emails?wait=2`, { headers: K }),
    conform('GET', `/api/v1/inboxes/${empty}/latest?wait=2`, { headers: K }),
  ]);
  assert.deepEqual(both.map((ex) => ex.answer!.status).sort(), [200, 429]);
  // webhooks
  await conform('GET', '/api/v1/webhooks', { headers: K }, 200);
  await conform('GET', '/api/v1/webhooks', {}, 401);
  await ctx.receiver.until(2); // the two emails' events
  await conform('GET', `/api/v1/webhooks/${ctx.webhookId}/deliveries?limit=5`, { headers: K }, 200);
  await conform('POST', '/api/v1/webhooks', { headers: { ...K, ...JSON_TYPE }, body: JSON.stringify({ url: 'ftp://127.0.0.1/x', address: INBOX }) }, 400);
  await conform('POST', '/api/v1/webhooks', { headers: { ...K, ...JSON_TYPE }, body: JSON.stringify({ url: `${ctx.receiver.url}/all`, address: `*@${DOMAIN}` }) }, 403);
  const extra = await conform('POST', '/api/v1/webhooks', { headers: { ...K, ...JSON_TYPE }, body: JSON.stringify({ url: `${ctx.receiver.url}/x`, address: `x@${DOMAIN}` }) }, 201);
  await conform('DELETE', `/api/v1/webhooks/${extra.json.data.id}`, { headers: K }, 204);
  await conform('DELETE', `/api/v1/webhooks/${extra.json.data.id}`, { headers: K }, 404);
  // SMTP faults
  const FA = `/api/v1/inboxes/${enc(`faulty@${DOMAIN}`)}/faults`;
  const rule = await conform('POST', FA, { headers: { ...K, ...JSON_TYPE }, body: '{"stage":"rcpt","reply":"451 4.7.1 Try again later","times":2}' }, 201);
  await conform('POST', FA, { headers: { ...K, ...JSON_TYPE }, body: '{"stage":"data","delay_seconds":5}' }, 201);
  await conform('POST', FA, { headers: { ...K, ...JSON_TYPE }, body: '{"stage":"rcpt","reply":"250 ok"}' }, 400);
  await conform('GET', FA, { headers: K }, 200);
  await conform('DELETE', `${FA}/${rule.json.data.id}`, { headers: K }, 204);
  await conform('DELETE', `${FA}/${rule.json.data.id}`, { headers: K }, 404);
  await conform('DELETE', FA, { headers: K }, 200);
  // the admin API
  const A = { authorization: `Bearer ${ADMIN_TOKEN}` };
  await conform('GET', '/api/v1/admin/domains', { headers: A }, 200);
  await conform('POST', '/api/v1/admin/domains', { headers: { ...A, ...JSON_TYPE }, body: '{"domain":"second.wire.test"}' }, 201);
  await conform('POST', '/api/v1/admin/domains', { headers: { ...A, ...JSON_TYPE }, body: '{"domain":"second.wire.test"}' }, 200);
  await conform('DELETE', '/api/v1/admin/domains/second.wire.test', { headers: A }, 200);
  await conform('DELETE', `/api/v1/admin/domains/${DOMAIN}`, { headers: A }, 409);
  await conform('DELETE', '/api/v1/admin/domains/never.wire.test', { headers: A }, 404);
  await conform('GET', '/api/v1/admin/keys?limit=5', { headers: A }, 200);
  await conform('GET', `/api/v1/admin/faults?address=${enc(`faulty@${DOMAIN}`)}`, { headers: A }, 200);
  await conform('GET', '/api/v1/admin/faults', { headers: A }, 400);
  await conform('DELETE', `/api/v1/admin/faults?key_prefix=${k1.json.data.key_prefix}`, { headers: A }, 200);
  await conform('DELETE', `/api/v1/admin/keys/${revoked.slice(0, 12)}`, { headers: A }, 200);
  await conform('DELETE', '/api/v1/admin/keys/eph_', { headers: A }, 400);
  await conform('DELETE', '/api/v1/admin/keys/eph_00000000', { headers: A }, 404);
  await conform('GET', '/api/v1/me', { headers: { authorization: `Bearer ${revoked}` } }, 401);
  // deleting
  await conform('DELETE', `/api/v1/emails/${(newest.has_attachments ? oldest : newest).id}`, { headers: K }, 204);
  await conform('DELETE', `/api/v1/emails/${(newest.has_attachments ? oldest : newest).id}`, { headers: K }, 404);
  await conform('DELETE', `/api/v1/inboxes/${enc(`purge@${DOMAIN}`)}/emails`, { headers: K }, 200);
  await conform('DELETE', `/api/v1/webhooks/${ctx.webhookId}`, { headers: K }, 204);
  ctx.webhookId = extra.json.data.id; // (gone: its paths answer 404)

  // every operation of the document was reached, each with a success
  const missing = ctx.ops.filter((o) => ![...(ctx.seen.get(o.id) ?? [])].some((s) => s >= 200 && s < 300)).map((o) => `${o.method} ${o.template}`);
  assert.deepEqual(missing, [], 'operations without a 2xx through the proxy');
  assert.ok(Object.keys(doc.paths).length > 0);
});

// ---- generated bad inputs -------------------------------------------------------------------

/** A path segment: junk of every kind, percent-encoded or raw, short and over-long. */
const segment = fc.oneof(
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map(enc),
  fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 40 }).map(enc),
  fc.uuid().map(String),
  fc.constantFrom('%zz', '%', '%00', '%2F', '%E0%A4%A', '..%2F..', 'a%40b', '%40', 'NaN', '-1', 'null', 'eph_', 'wh_x', 'flt_x', 'x.pdf', 'ephemail.test', '*%40ephemail.test'),
  fc.integer({ min: 990, max: 1100 }).map((n) => 'a'.repeat(n)),
).filter((s) => s !== '.' && s !== '..'); // (a dot segment is resolved away by the client: another path)

/** A query value: numbers out of range, not numbers, ids, junk, long. */
const queryValue = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String),
  fc.constantFrom('', '0', '1e309', '-0', '0x10', '1.5', 'NaN', 'Infinity', 'null', 'true', '[]', '{}', '101', '31', '1001'),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.uuid().map(String),
  fc.integer({ min: 100, max: 2000 }).map((n) => 'q'.repeat(n)),
);

/** A wait: never one that holds long (a held request is a second at most). */
const waitValue = fc.oneof({ weight: 8, arbitrary: fc.constantFrom('0', '-1', '31', 'abc', '1.5', '', '1e309', '100000000000') }, { weight: 1, arbitrary: fc.constant('1') });

/** The values a real request would put in each path parameter (a DELETE's name nothing the later tests read). */
function goodParam(op: Operation, name: string): string {
  if (op.method === 'DELETE' && name !== 'domain' && name !== 'prefix') return name === 'address' ? enc(`scratch@${DOMAIN}`) : '0190a0a0-0000-7000-8000-000000000000';
  if (name === 'address') return enc(INBOX);
  if (name === 'attachment_id') return ctx.attachmentId;
  if (name === 'domain') return 'never.wire.test';
  if (name === 'prefix') return 'eph_00000000';
  if (name === 'id') return op.template.startsWith('/api/v1/webhooks') ? ctx.webhookId : op.template.includes('/faults/') ? 'flt_0' : ctx.emailId;
  return 'x';
}

function fill(op: Operation, params: Record<string, string>): string {
  return op.template.replace(/\{([^}]+)\}/g, (_m, name: string) => params[name] ?? goodParam(op, name));
}

/** The credential an operation takes (the admin API's failure bucket is spent only by the credentials test, last). */
function authFor(op: Operation): Record<string, string> {
  return op.admin ? { authorization: `Bearer ${ADMIN_TOKEN}` } : { authorization: `Bearer ${ctx.key}` };
}

/** Runs a generated request and fails the property (fast-check then shrinks it) when its answer is not described. */
async function check(method: string, path: string, s: Send): Promise<void> {
  const ex = await send(method, path, s);
  const found = problems(ex, method, path);
  assert.deepEqual(found, [], `${found.join('\n')}\nbody: ${ex.answer?.body.toString('utf8').slice(0, 300)}`);
}

const withParams = () => ctx.ops.filter((o) => o.template.includes('{'));

test('every operation, refused before its route looks: each answer is described', async () => {
  for (const op of ctx.ops) {
    const path = fill(op, {});
    const auth = authFor(op);
    await check(op.method, `${path}?pad=${'p'.repeat(8200)}`, { headers: auth }); // a URL over 8 KiB
    await check(op.method, path, { headers: { ...auth, 'sec-fetch-dest': 'image' } }); // not a load the API answers
    for (const name of op.template.match(/\{([^}]+)\}/g)?.map((m) => m.slice(1, -1)) ?? []) {
      await check(op.method, fill(op, { [name]: '%zz' }), { headers: auth }); // not percent-encoding
      await check(op.method, fill(op, { [name]: 'a'.repeat(1001) }), { headers: auth }); // a segment over 1000 characters
    }
    if (op.method === 'POST' || op.method === 'DELETE') {
      await check(op.method, path, { headers: auth, body: '{"a":', asType: 'application/json' }); // not JSON
      await check(op.method, path, { headers: auth, body: JSON.stringify({ label: 'l'.repeat(70_000) }), asType: 'application/json' }); // over 64 KiB
      await check(op.method, path, { headers: auth, body: '<a/>', asType: 'application/xml' }); // not a type the API reads
    }
  }
});
const withQuery = () => ctx.ops.filter((o) => o.query.length > 0);

test('generated bad path parameters: every answer is described', async () => {
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...withParams()), fc.dictionary(fc.constantFrom('address', 'id', 'attachment_id', 'domain', 'prefix'), segment), fc.boolean(), async (op, params, keyed) => {
      await check(op.method, fill(op, params), { headers: keyed || op.admin ? authFor(op) : {} });
    }),
    { numRuns: RUNS },
  );
});

test('generated bad query strings: every answer is described', async () => {
  const unknown = fc.constantFrom('x', 'limit[]', 'cursor', 'page', '__proto__', 'constructor');
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...withQuery()),
      fc.array(fc.tuple(fc.oneof(fc.nat(), unknown), queryValue, waitValue), { maxLength: 5 }),
      fc.boolean(),
      async (op, pairs, keyed) => {
        const q = new URLSearchParams();
        for (const [name, value, wait] of pairs) {
          const n = typeof name === 'number' ? op.query[name % op.query.length] : name;
          q.append(n, n === 'wait' ? wait : value);
        }
        await check(op.method, `${fill(op, {})}?${q}`, { headers: keyed || op.admin ? authFor(op) : {} });
      },
    ),
    { numRuns: RUNS },
  );
});

test('generated bad bodies and content types: every answer is described', async () => {
  const bodied = ctx.ops.filter((o) => o.hasBody || o.method === 'DELETE' || o.method === 'POST');
  const types = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/merge-patch+json', 'text/plain', 'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x', 'application/xml', 'application/octet-stream', 'application/json; charset=latin1', 'application/jsonx', 'nonsense');
  const body = fc.oneof(
    fc.json({ maxDepth: 3 }),
    fc.record({ label: fc.anything(), contact_email: fc.string(), domain: fc.string(), local_part: fc.string(), url: fc.webUrl(), address: fc.emailAddress(), stage: fc.constantFrom('rcpt', 'data', 'x'),
      reply: fc.string(), delay_seconds: fc.integer(), disconnect: fc.anything(), times: fc.integer() }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
    fc.string({ unit: 'grapheme', maxLength: 60 }),
    fc.constantFrom('{', '{"a":', '[1,', 'nul', '{"domain":"x",}', '\u0000', ' ', '{"__proto__":{"x":1}}'),
    fc.integer({ min: 64 * 1024, max: 70 * 1024 }).map((n) => JSON.stringify({ label: 'l'.repeat(n) })),
  );
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...bodied), body, types, fc.boolean(), async (op, text, type, keyed) => {
      await check(op.method, fill(op, {}), { headers: keyed || op.admin ? authFor(op) : {}, body: text, asType: type });
    }),
    { numRuns: RUNS },
  );
});

test('generated long URLs and request headers: every answer is described', async () => {
  const header = fc.string({ unit: 'binary-ascii', maxLength: 80 }).map((s) => s.replace(/[^\x20-\x7e]/g, '').trim());
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...ctx.ops),
      fc.integer({ min: 8000, max: 9000 }),
      fc.record({
        'sec-fetch-site': fc.constantFrom('same-origin', 'cross-site', 'none'),
        'sec-fetch-dest': fc.constantFrom('image', 'script', 'document', 'empty', 'iframe'),
        accept: fc.constantFrom('text/html', 'application/xml', '*/*', 'text/event-stream'),
        'last-event-id': header,
        origin: fc.constantFrom('https://evil.example', 'null'),
      }, { requiredKeys: [] }),
      async (op, length, headers) => {
        const path = fill(op, {});
        const long = `${path}?pad=${'p'.repeat(Math.max(0, length - path.length))}`;
        await check(op.method, long, { headers: { ...authFor(op), ...headers } });
        await check(op.method, path, { headers: { ...authFor(op), ...headers } });
      },
    ),
    { numRuns: Math.ceil(RUNS / 4) },
  );
});

test('a spent anonymous bucket: every operation\'s answer is described', async () => {
  for (let i = 0; i < 300; i++) {
    const ex = await send('GET', '/api/v1/domains');
    assert.deepEqual(problems(ex, 'GET', '/api/v1/domains'), []);
    if (ex.answer?.status === 429) break;
  }
  let refused = 0;
  for (const op of ctx.ops.filter((o) => !o.admin)) {
    const ex = await send(op.method, fill(op, {}));
    assert.deepEqual(problems(ex, op.method, fill(op, {})), []);
    if (ex.answer?.status === 429) refused++;
  }
  assert.ok(refused > 0, 'some operations answered 429 rate_limited');
});

test('generated bad credentials, then a spent admin-failure bucket: every answer is described', async () => {
  const token = fc.oneof(
    fc.string({ unit: 'binary-ascii', maxLength: 60 }).map((s) => s.replace(/[^\x21-\x7e]/g, '')),
    fc.constantFrom('eph_', 'eph_0000000000000000000000000000000000000000', ADMIN_TOKEN.slice(0, -1), ''),
  );
  const credentials = fc.oneof(
    token.map((t) => ({ authorization: `Bearer ${t}` })),
    token.map((t) => ({ authorization: `Basic ${t}` })),
    token.map((t) => ({ authorization: t })),
    token.filter((t) => t.length > 0).map((t) => ({ 'x-api-key': t })),
    token.map((t) => ({ authorization: `Bearer ${ctx.key}`, 'x-api-key': t })),
    fc.constant({ authorization: `Bearer ${ADMIN_TOKEN}` }),
    fc.constant({ authorization: `Bearer ${ctx.key}` }),
  );
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...ctx.ops), credentials, async (op, headers) => {
      await check(op.method, fill(op, {}), { headers });
    }),
    { numRuns: RUNS },
  );
  // the admin API's failure bucket is spent by now (429 before any token is looked at): answers described too
  for (const op of ctx.ops.filter((o) => o.admin)) await check(op.method, fill(op, {}), { headers: { authorization: 'Bearer wrong' } });
  const summary = ctx.ops.map((o) => `${o.method} ${o.template}: ${[...(ctx.seen.get(o.id) ?? [])].sort().join(' ')}`);
  console.log(`# statuses answered through the proxy, per operation:\n${summary.map((l) => `#   ${l}`).join('\n')}`);
});

test('the proxy finds an answer the document does not describe (status, media type, body)', async () => {
  // the same document with three untruths: getEmail never answers 404, the raw source is text/plain,
  // and the error envelope has a required field it never carries
  const doctored = structuredClone(ctx.doc);
  delete doctored.paths['/api/v1/emails/{id}'].get.responses['404'];
  const raw = doctored.paths['/api/v1/emails/{id}/raw'].get.responses['200'];
  raw.content = { 'text/plain': raw.content['message/rfc822'] };
  const error = doctored.components.schemas.Error ?? Object.values(doctored.components.schemas).find((s: any) => s.title === 'Error');
  assert.ok(error, 'the document has the error envelope schema');
  error.required = [...(error.required ?? []), 'not_on_the_wire'];
  const file = join(dir, 'doctored.json');
  writeFileSync(file, JSON.stringify(doctored));
  const liar = await startWireProxy(file, ctx.served.http);
  try {
    const messages = async (method: string, path: string, headers: Record<string, string> = {}) =>
      (await send(method, path, { headers }, liar)).violations.filter((v) => v.location[0] === 'response').map((v) => v.message).join(' | ');
    // (with the key: the anonymous bucket is spent by now)
    const K = { authorization: `Bearer ${ctx.key}` };
    assert.match(await messages('GET', '/api/v1/emails/0190a0a0-0000-7000-8000-000000000000', K), /Unable to match the returned status code/);
    assert.match(await messages('GET', `/api/v1/emails/${ctx.emailId}/raw`, K), /media type "message\/rfc822" does not match/);
    assert.match(await messages('GET', '/api/v1/me', { 'x-api-key': 'eph_nope' }), /not_on_the_wire/);
    // and the true document has none of these
    assert.equal((await send('GET', '/api/v1/me', { headers: { 'x-api-key': 'eph_nope' } })).violations.length, 0);
  } finally {
    await liar.close();
  }
});
