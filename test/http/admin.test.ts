// The admin API (docs/deploy.md "The admin API"), over real sockets on one node: off without
// EPHEMAIL_ADMIN_TOKEN (every admin path answered as an unknown path, whatever is sent); on, a bearer
// token compared in constant time, outside the quota, every call logged; domains added and retired
// (served at once by the API, SMTP, the tool endpoint and the page; a retired one's mail still
// readable); keys listed (never the key or its hash) and revoked; its own tag and security scheme.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { callRaw } from '../mcp/helpers.ts';
import { expectError, ISO_UTC } from '../helpers/contract.ts';
import { captureLog, type CapturedLog } from '../helpers/log.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

const TOKEN = 'admin-token-for-tests-0123456789abcdef';
/** `{base_url}` of the docs links (EPHEMAIL_PUBLIC_URL unset: localhost and the bound port). */
const base = (svc: TestService) => svc.http.replace('127.0.0.1', 'localhost');

describe('admin API off (no EPHEMAIL_ADMIN_TOKEN)', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' });
  });
  after(() => svc.stop());

  test('every admin path answers exactly as an unknown path does, whatever is sent: 404 with no credential or a valid key, 401 with a bad one', async () => {
    const key = (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
    const paths: [string, string][] = [
      ['GET', '/api/v1/admin/domains'], ['POST', '/api/v1/admin/domains'], ['DELETE', '/api/v1/admin/domains/new.example'],
      ['GET', '/api/v1/admin/keys'], ['DELETE', '/api/v1/admin/keys/eph_abcdefgh'], ['GET', '/api/v1/admin/faults?address=a%40ephemail.test'],
      ['DELETE', '/api/v1/admin/faults?key_prefix=eph_abcdefgh'], ['GET', '/api/v1/admin'], ['GET', '/api/v1/%61dmin/keys'],
    ];
    const credentials: [Record<string, string>, number, string][] = [
      [{}, 404, 'not_found'],
      [{ authorization: `Bearer ${key}` }, 404, 'not_found'],
      [{ 'x-api-key': key }, 404, 'not_found'],
      [{ authorization: `Bearer ${TOKEN}` }, 401, 'unauthorized'],
      [{ authorization: 'Bearer eph_not-a-real-key' }, 401, 'unauthorized'],
      [{ authorization: 'Basic abc' }, 401, 'unauthorized'],
    ];
    // what the wire carries, with the path named in a 404's message put aside
    const answer = async (method: string, path: string, headers: Record<string, string>) => {
      const res = await svc.api(path, { method, headers: method === 'POST' ? { ...headers, 'content-type': 'application/json' } : headers, body: method === 'POST' ? '{"domain":"new.example"}' : undefined });
      const body = JSON.parse(await res.text());
      return {
        status: res.status, contentType: res.headers.get('content-type'), limited: res.headers.get('ratelimit-limit'), keys: Object.keys(body),
        type: body.error.type, message: body.error.message.replace(/^No endpoint \S+ \S+/, 'No endpoint …'),
      };
    };
    for (const [headers, status, type] of credentials) {
      for (const [method, path] of paths) {
        const unknown = await answer(method, '/api/v1/no-such-endpoint', headers);
        assert.equal(unknown.status, status);
        assert.equal(unknown.type, type);
        assert.deepEqual(await answer(method, path, headers), unknown, `${method} ${path} with ${JSON.stringify(headers)}`);
      }
      const res = await svc.api('/api/v1/admin/domains', { headers });
      await expectError(res, status, type, base(svc), status === 404 ? /^No endpoint GET \/api\/v1\/admin\/domains/ : undefined);
    }
  });

  test('the OpenAPI document has no admin path, tag or security scheme', async () => {
    const doc = await (await svc.api('/api/v1/openapi.json')).json();
    assert.deepEqual(Object.keys(doc.paths).filter((p) => p.includes('admin')), []);
    assert.ok(!doc.tags.some((t: { name: string }) => t.name === 'admin'));
    assert.equal(doc.components.securitySchemes.adminToken, undefined);
  });
});

describe('admin API on', () => {
  let svc: TestService;
  let captured: CapturedLog;
  const admin = (path: string, init: { method?: string; body?: unknown; token?: string | null } = {}) => {
    const headers: Record<string, string> = {};
    if (init.token !== null) headers.authorization = `Bearer ${init.token ?? TOKEN}`;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    return svc.api(`/api/v1/admin${path}`, { method: init.method ?? 'GET', headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) });
  };
  const activeDomains = async () => ((await (await svc.api('/api/v1/domains')).json()).data as { domain: string }[]).map((d) => d.domain);
  const rcpt = async (to: string) => (await sendRaw(svc.smtpPort, { from: 's@example.org', to: [to], body: 'Subject: x\r\n\r\nx' })).rcpt[0];

  before(async () => {
    captured = captureLog('info');
    svc = await startService({ EPHEMAIL_ADMIN_TOKEN: TOKEN, EPHEMAIL_DOMAINS: 'ephemail.test,second.test', EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000' }, { log: captured.log });
  });
  after(() => svc.stop());

  test('a missing, wrong or malformed token, or an API key, is 401 unauthorized; admin calls spend no quota and carry no rate-limit headers', async () => {
    await expectError(await admin('/domains', { token: null }), 401, 'unauthorized', base(svc), /Authorization: Bearer <EPHEMAIL_ADMIN_TOKEN>/);
    await expectError(await admin('/domains', { token: `${TOKEN.slice(0, -1)}x` }), 401, 'unauthorized', base(svc), /not valid/);
    await expectError(await admin('/domains', { token: 'short' }), 401, 'unauthorized', base(svc));
    await expectError(await admin('/keys', { token: `eph_${'A'.repeat(40)}` }), 401, 'unauthorized', base(svc));
    await expectError(await svc.api('/api/v1/admin/keys', { headers: { authorization: `Basic ${TOKEN}` } }), 401, 'unauthorized', base(svc));
    for (let i = 0; i < 8; i++) {
      const res = await admin('/domains');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('ratelimit-limit'), null, 'outside the quota: no rate-limit headers');
      await res.arrayBuffer();
    }
    // 13 admin calls from this IP: none counted in its anonymous bucket
    const me = await (await svc.api('/api/v1/me')).json();
    assert.equal(me.data.usage.requests_this_minute, 0);
    await expectError(await admin('/nothing-here'), 404, 'not_found', base(svc), /No endpoint GET \/api\/v1\/admin\/nothing-here/);
  });

  test('domains: add (201, again 200), refused for a bad name (400) or a domain of EPHEMAIL_DOMAINS (409); listed with source, state and times', async () => {
    const added = await admin('/domains', { method: 'POST', body: { domain: 'Fresh.Example.' } });
    assert.equal(added.status, 201);
    const entry = (await added.json()).data;
    assert.deepEqual({ ...entry, added_at: 'x' }, { domain: 'fresh.example', source: 'added', state: 'active', added_at: 'x', retired_at: null });
    assert.match(entry.added_at, ISO_UTC);
    const again = await admin('/domains', { method: 'POST', body: { domain: 'fresh.example' } });
    assert.equal(again.status, 200);
    assert.deepEqual((await again.json()).data, entry, 'unchanged');

    for (const bad of ['not a domain', 'x..example', '-lead.example', 'a'.repeat(64) + '.example', 'üñí.example']) {
      await expectError(await admin('/domains', { method: 'POST', body: { domain: bad } }), 400, 'invalid_request', base(svc), /is not a domain name/);
    }
    await expectError(await admin('/domains', { method: 'POST', body: {} }), 400, 'invalid_request', base(svc), /domain/);
    await expectError(await admin('/domains', { method: 'POST', body: { domain: 'Second.test' } }), 409, 'conflict', base(svc), /EPHEMAIL_DOMAINS/);
    await expectError(await admin('/domains/ephemail.test', { method: 'DELETE' }), 409, 'conflict', base(svc), /ephemail\.test is in EPHEMAIL_DOMAINS and cannot be retired/);
    await expectError(await admin('/domains/never.example', { method: 'DELETE' }), 404, 'not_found', base(svc), /never\.example was never added/);
    await expectError(await admin('/domains/bad_name', { method: 'DELETE' }), 400, 'invalid_request', base(svc));

    const list = await (await admin('/domains')).json();
    assert.deepEqual(list.data.map((d: any) => [d.domain, d.source, d.state]), [['ephemail.test', 'config', 'active'], ['second.test', 'config', 'active'], ['fresh.example', 'added', 'active']]);
    assert.equal(list.meta.count, 3);
    assert.deepEqual(await activeDomains(), ['ephemail.test', 'second.test', 'fresh.example'], 'the default stays first');
  });

  test('an added domain is served at once: /domains, POST /inboxes, SMTP, create_inbox, the page, discovery', async () => {
    await admin('/domains', { method: 'POST', body: { domain: 'served.example' } });
    const inbox = await svc.api('/api/v1/inboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ domain: 'served.example' }) });
    assert.equal(inbox.status, 201);
    const address = (await inbox.json()).data.address as string;
    assert.match(address, /@served\.example$/);
    assert.match((await svc.send({ to: address, subject: 'hi', text: 'hello' })).response, /^250/);
    const mcp = await callRaw(svc, 'create_inbox', { domain: 'served.example' });
    assert.equal(mcp.result.isError, undefined);
    assert.match(mcp.result.structuredContent.address, /@served\.example$/);
    assert.ok(mcp.result.structuredContent.available_domains.includes('served.example'));
    assert.match(await (await svc.api('/')).text(), /<code>served\.example<\/code>/);
    assert.ok((await (await svc.api('/api/v1')).json()).data.domains.includes('served.example'));
    assert.match(await (await svc.api('/metrics')).text(), /^ephemail_domains_active [3-9]$/m, 'the gauge counts it');
  });

  test('a retired domain takes no new mail (RCPT 550 5.1.2, POST /inboxes 400, create_inbox isError) but its stored mail stays readable; it can be added again', async () => {
    await admin('/domains', { method: 'POST', body: { domain: 'old.example' } });
    const address = `keep-${Date.now()}@old.example`;
    const text = 'This message was kept after its domain was retired.';
    await svc.send({ to: address, subject: 'before retiring', text, html: `<p>${text}</p>`, attachments: [{ filename: 'a.txt', content: 'attached' }] });

    const retired = await admin('/domains/OLD.example', { method: 'DELETE' });
    assert.equal(retired.status, 200);
    const entry = (await retired.json()).data;
    assert.equal(entry.state, 'retired');
    assert.match(entry.retired_at, ISO_UTC);
    const again = await (await admin('/domains/old.example', { method: 'DELETE' })).json();
    assert.deepEqual(again.data, entry, 'retiring again changes nothing');

    assert.ok(!(await activeDomains()).includes('old.example'));
    const r = await rcpt(`new-${Date.now()}@old.example`);
    assert.equal(r.code, 550);
    assert.match(r.text, /^5\.1\.2 This service no longer accepts mail for old\.example/);
    await expectError(await svc.api('/api/v1/inboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ domain: 'old.example' }) }), 400, 'invalid_request', base(svc), /old\.example.*was retired/);
    const mcp = await callRaw(svc, 'create_inbox', { domain: 'old.example' });
    assert.equal(mcp.result.isError, true);
    assert.match(mcp.result.content[0].text, /old\.example/);
    assert.doesNotMatch(await (await svc.api('/')).text(), /old\.example/);
    await expectError(await svc.api('/api/v1/webhooks', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${await mint('webhook')}` }, body: JSON.stringify({ url: 'https://hooks.example/x', address: '*@old.example' }) }), 400, 'invalid_request', base(svc), /old\.example was retired/);

    // its stored mail: list, get, raw, attachments, the page, the tools
    const list = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`);
    assert.equal(list.status, 200);
    const [email] = (await list.json()).data;
    assert.equal(email.subject, 'before retiring');
    const full = await (await svc.api(`/api/v1/emails/${email.id}`)).json();
    assert.equal(full.data.text_body.trim(), text);
    assert.equal((await svc.api(`/api/v1/emails/${email.id}/raw`)).status, 200);
    const atts = await (await svc.api(`/api/v1/emails/${email.id}/attachments`)).json();
    assert.equal(atts.meta.count, 1);
    assert.equal(await (await svc.api(`/api/v1/emails/${email.id}/attachments/${atts.data[0].id}`)).text(), 'attached');
    assert.equal((await svc.api(`/inbox/${encodeURIComponent(address)}`)).status, 200);
    const checked = await callRaw(svc, 'check_inbox', { address });
    assert.equal(checked.result.isError, undefined);
    assert.equal(checked.result.structuredContent.count, 1);
    const read = await callRaw(svc, 'read_email', { email_id: email.id });
    assert.equal(read.result.isError, undefined);
    assert.match(read.result.structuredContent.body, /was kept after its domain was retired/);
    // a domain never served stays unknown
    await expectError(await svc.api(`/api/v1/inboxes/${encodeURIComponent('x@elsewhere.example')}/emails`), 404, 'not_found', base(svc));

    const readded = await admin('/domains', { method: 'POST', body: { domain: 'old.example' } });
    assert.equal(readded.status, 201);
    assert.equal((await readded.json()).data.retired_at, null);
    assert.equal((await rcpt(`new-${Date.now()}@old.example`)).code, 250);
  });

  const mint = async (label: string): Promise<string> => {
    const res = await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label }) });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()).data.api_key;
  };

  test('keys: listed newest first with prefix, label, created, last used, revoked (never the key or its hash); revoked by prefix: 401 at once', async () => {
    const used = await mint('used key');
    const unused = await mint('unused key');
    assert.equal((await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${used}` } })).status, 200);
    let listed: any;
    // a use is recorded without being waited for
    const text = async () => (await admin(`/keys?prefix=${used.slice(0, 12)}`)).text();
    await until(async () => Boolean((listed = JSON.parse(await text())).data[0]?.last_used_at), 'the use is recorded');
    assert.deepEqual(Object.keys(listed.data[0]).sort(), ['created_at', 'key_prefix', 'label', 'last_used_at', 'revoked_at']);
    assert.equal(listed.data[0].label, 'used key');
    assert.match(listed.data[0].last_used_at, ISO_UTC);
    const all = await (await admin('/keys')).text();
    for (const k of [used, unused]) {
      assert.ok(!all.includes(k) && !all.includes(k.slice(12)), 'never the key');
      assert.ok(!all.includes(createHash('sha256').update(k).digest('hex')), 'never its hash');
    }
    const body = JSON.parse(all);
    assert.equal(body.data[0].key_prefix, unused.slice(0, 12), 'newest first');
    assert.equal(body.data[0].last_used_at, null);
    assert.equal(body.meta.total, body.data.length);
    assert.equal((await (await admin('/keys?limit=1')).json()).meta.count, 1);
    await expectError(await admin('/keys?limit=0'), 400, 'invalid_request', base(svc), /limit/);

    const revoked = await admin(`/keys/${used.slice(0, 12)}`, { method: 'DELETE' });
    assert.equal(revoked.status, 200);
    const r = (await revoked.json()).data;
    assert.equal(r.key_prefix, used.slice(0, 12));
    assert.match(r.revoked_at, ISO_UTC);
    await expectError(await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${used}` } }), 401, 'unauthorized', base(svc), /revoked/);
    assert.deepEqual((await (await admin(`/keys/${used.slice(0, 12)}`, { method: 'DELETE' })).json()).data, r, 'revoking again changes nothing');
    assert.equal((await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${unused}` } })).status, 200, 'only that key');
    await expectError(await admin('/keys/eph_abc', { method: 'DELETE' }), 400, 'invalid_request', base(svc), /whole 12-character prefix/);
    await expectError(await admin('/keys/eph_ZZZZZZZZ', { method: 'DELETE' }), 404, 'not_found', base(svc), /No key has the prefix eph_ZZZZZZZZ/);
  });

  test('every admin call is logged with its route and outcome; a refused one at warn', async () => {
    const calls = captured.find('admin call').map((l) => l.admin as { route: string; status: number; outcome: string; target?: string });
    assert.ok(calls.some((c) => c.route === 'POST /api/v1/admin/domains' && c.status === 201 && c.outcome === 'ok' && c.target === 'Fresh.Example.'));
    assert.ok(calls.some((c) => c.route === 'DELETE /api/v1/admin/domains/:domain' && c.status === 409 && c.outcome === 'conflict' && c.target === 'ephemail.test'));
    assert.ok(calls.some((c) => c.route === 'DELETE /api/v1/admin/keys/:prefix' && c.status === 200 && c.outcome === 'ok'));
    const refused = captured.find('admin call refused');
    assert.ok(refused.length >= 4);
    assert.ok(refused.every((l) => l.level === 40 && (l.admin as { outcome: string }).outcome === 'unauthorized'));
    assert.ok(!JSON.stringify(captured.lines).includes(TOKEN), 'the token is never logged');
  });

  test('OpenAPI: the admin routes under their own tag and security scheme, without rate-limit headers', async () => {
    const doc = await (await svc.api('/api/v1/openapi.json')).json();
    assert.deepEqual(doc.components.securitySchemes.adminToken, { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <EPHEMAIL_ADMIN_TOKEN> (the admin API only)' });
    assert.ok(doc.tags.some((t: { name: string }) => t.name === 'admin'));
    const ops = Object.entries(doc.paths).filter(([p]) => p.startsWith('/api/v1/admin/')).flatMap(([p, item]) => Object.entries(item as object).map(([m, op]) => [`${m.toUpperCase()} ${p}`, op] as [string, any]));
    assert.deepEqual(ops.map(([k]) => k).sort(), ['DELETE /api/v1/admin/domains/{domain}', 'DELETE /api/v1/admin/faults', 'DELETE /api/v1/admin/keys/{prefix}', 'GET /api/v1/admin/domains', 'GET /api/v1/admin/faults', 'GET /api/v1/admin/keys', 'POST /api/v1/admin/domains']);
    for (const [k, op] of ops) {
      assert.deepEqual(op.tags, ['admin'], k);
      assert.deepEqual(op.security, [{ adminToken: [] }], k);
      assert.ok(op.responses['401'], `${k} documents 401`);
      assert.deepEqual(Object.keys(op.responses['429'].headers), ['retry-after'], `${k} documents 429 (failed tokens) with Retry-After`);
      for (const res of Object.values(op.responses) as any[]) assert.equal(res.headers?.['ratelimit-limit'], undefined, k);
    }
    assert.ok(doc.paths['/api/v1/admin/domains'].post.responses['409']);
  });
});
