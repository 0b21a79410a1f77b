// The tool endpoint's transport rules over raw HTTP (spec: POST /mcp; docs/contract-decisions.md "Tool endpoint
// protocol"): version negotiation, JSON-only Accept, batches, GET 405, JSON-RPC error codes, CORS,
// the Host check, and the Mcp-Session-Id header.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { INIT_PARAMS, rawHttp, rpc } from './helpers.ts';

const SESSION_RE = /^[A-Za-z0-9_-]{22}\.[0-9a-z]{1,10}\.[A-Za-z0-9_-]{22}$/; // nonce, issue time, signature

describe('POST /mcp transport rules', () => {
  let svc: TestService;
  let port: string;
  before(async () => {
    svc = await startService();
    port = new URL(svc.http).port;
  });
  after(() => svc.stop());

  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    test(`initialize with ${version} is answered with ${version}`, async () => {
      const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS(version) });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const body = await res.json();
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.id, 1);
      assert.equal(body.result.protocolVersion, version);
      assert.deepEqual(body.result.capabilities, { tools: { listChanged: false } });
      assert.equal(body.result.serverInfo.name, 'ephemail');
    });
  }

  for (const version of ['2099-01-01', '2024-10-07', 'banana']) {
    test(`initialize with an unknown version (${version}) gets the latest`, async () => {
      const body = await (await rpc(svc, { jsonrpc: '2.0', id: 'x', method: 'initialize', params: INIT_PARAMS(version) })).json();
      assert.equal(body.id, 'x');
      assert.equal(body.result.protocolVersion, '2025-11-25');
    });
  }

  test('initialize answers with a signed Mcp-Session-Id, a new one each time; other methods do not', async () => {
    const a = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() });
    const b = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() });
    const idA = a.headers.get('mcp-session-id');
    const idB = b.headers.get('mcp-session-id');
    assert.match(idA ?? '', SESSION_RE);
    assert.match(idB ?? '', SESSION_RE);
    assert.notEqual(idA, idB);
    const list = await rpc(svc, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': idA!, 'mcp-protocol-version': '2025-11-25' });
    assert.equal(list.status, 200);
    assert.equal(list.headers.get('mcp-session-id'), null);
  });

  test('a client whose Accept lists only application/json is served JSON (also with no Accept, or */*)', async () => {
    for (const accept of ['application/json', 'application/json; charset=utf-8', '*/*', 'application/json, text/event-stream']) {
      const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'ping' }, { accept });
      assert.equal(res.status, 200, accept);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/, accept);
      assert.deepEqual(await res.json(), { jsonrpc: '2.0', id: 1, result: {} });
    }
    const none = await fetch(`${svc.http}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: '' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(none.status, 200);
  });

  test('Accept without JSON (event stream only) → 406 with a JSON-RPC error', async () => {
    const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'ping' }, { accept: 'text/event-stream' });
    assert.equal(res.status, 406);
    const body = await res.json();
    assert.equal(body.error.code, -32000);
    assert.match(body.error.message, /application\/json/);
  });

  test('batches are refused with -32600 whatever the version, and nothing in them runs', async () => {
    for (const batch of [
      [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' }],
      [{ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS('2025-03-26') }],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_inbox', arguments: {} } }],
      [],
    ]) {
      const res = await rpc(svc, batch, { 'mcp-protocol-version': '2025-03-26' });
      assert.equal(res.status, 400);
      const body = await res.json();
      assert.deepEqual(Object.keys(body).sort(), ['error', 'id', 'jsonrpc']);
      assert.equal(body.id, null);
      assert.equal(body.error.code, -32600);
      assert.match(body.error.message, /batch/i);
      assert.equal(res.headers.get('mcp-session-id'), null);
    }
  });

  test('malformed JSON → -32700; not JSON-RPC → -32600; unknown method → -32601; unknown tool → -32602', async () => {
    const parse = await rpc(svc, '{"jsonrpc":"2.0","id":1,"method":');
    assert.equal(parse.status, 400);
    assert.equal((await parse.json()).error.code, -32700);
    const empty = await rpc(svc, '');
    assert.equal((await empty.json()).error.code, -32700);

    for (const bad of [{ hello: 'world' }, { jsonrpc: '1.0', id: 7, method: 'ping' }, 42, 'ping', null]) {
      const res = await rpc(svc, JSON.stringify(bad));
      assert.equal(res.status, 400, JSON.stringify(bad));
      const body = await res.json();
      assert.equal(body.error.code, -32600, JSON.stringify(bad));
    }
    const withId = await (await rpc(svc, { jsonrpc: '1.0', id: 7, method: 'ping' })).json();
    assert.equal(withId.id, 7, 'the id of an invalid request is echoed when readable');

    const method = await (await rpc(svc, { jsonrpc: '2.0', id: 3, method: 'resources/list' })).json();
    assert.deepEqual(method, { jsonrpc: '2.0', id: 3, error: { code: -32601, message: 'Method not found' } });

    const tool = await (await rpc(svc, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'delete_everything', arguments: {} } })).json();
    assert.equal(tool.id, 4);
    assert.equal(tool.error.code, -32602);
    assert.match(tool.error.message, /^Unknown tool "delete_everything"; the tools are create_inbox, check_inbox, read_email$/);
  });

  test('bad arguments are an isError result, not a protocol error', async () => {
    const body = await (await rpc(svc, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'check_inbox', arguments: { address: 42 } } })).json();
    assert.equal(body.result.isError, true);
    assert.match(body.result.content[0].text, /invalid_request.*address/);
    const missing = await (await rpc(svc, { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'read_email' } })).json();
    assert.equal(missing.result.isError, true);
    assert.match(missing.result.content[0].text, /email_id/);
  });

  test('notifications are accepted with 202 and no body', async () => {
    const res = await rpc(svc, { jsonrpc: '2.0', method: 'notifications/initialized' });
    assert.equal(res.status, 202);
    assert.equal(await res.text(), '');
  });

  test('GET, DELETE, PUT on /mcp → 405 with Allow: POST', async () => {
    for (const method of ['GET', 'DELETE', 'PUT']) {
      const res = await fetch(`${svc.http}/mcp`, { method, headers: { accept: 'text/event-stream' } });
      assert.equal(res.status, 405, method);
      assert.match(res.headers.get('allow') ?? '', /POST/);
      assert.equal((await res.json()).error.code, -32000);
    }
  });

  test('Content-Type other than JSON → 415; a body over 64 KiB → 413; both JSON-RPC errors', async () => {
    const text = await fetch(`${svc.http}/mcp`, { method: 'POST', headers: { 'content-type': 'text/plain', accept: 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    assert.equal(text.status, 415);
    assert.equal((await text.json()).error.code, -32000);
    const big = await rpc(svc, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(70_000) } }));
    assert.equal(big.status, 413);
    assert.equal((await big.json()).error.code, -32600);
  });

  test('an unsupported MCP-Protocol-Version header → 400', async () => {
    const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '2024-10-07' });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05/);
  });

  test('CORS: any origin, Mcp-Session-Id exposed; OPTIONS preflight allows the MCP headers', async () => {
    const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() }, { origin: 'https://agent.example' });
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.match(res.headers.get('access-control-expose-headers') ?? '', /Mcp-Session-Id/i);
    const pre = await fetch(`${svc.http}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: 'https://agent.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, mcp-session-id, mcp-protocol-version' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/);
    for (const h of ['content-type', 'mcp-session-id', 'mcp-protocol-version']) assert.match(pre.headers.get('access-control-allow-headers') ?? '', new RegExp(h, 'i'));
  });

  test('DNS rebinding: a Host that is neither the public host nor loopback → 403; loopback names pass', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() });
    const headers = (host: string) => ({ host, origin: `http://${host}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    for (const host of ['evil.example.com', `evil.example.com:${port}`, 'localhost.evil.example', '127.0.0.1.nip.io', '127.0.0.1.evil.example']) {
      const res = await rawHttp(`${svc.http}/mcp`, { headers: headers(host), body });
      assert.equal(res.status, 403, host);
      assert.equal(JSON.parse(res.body).error.code, -32000);
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost', 'LOCALHOST']) {
      const res = await rawHttp(`${svc.http}/mcp`, { headers: headers(host), body });
      assert.equal(res.status, 200, host);
    }
  });
});

describe('POST /mcp behind a public URL', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_PUBLIC_URL: 'https://mail.example.org/' });
  });
  after(() => svc.stop());

  test('the public host passes the Host check; links come from EPHEMAIL_PUBLIC_URL, not Host', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_inbox', arguments: { name: 'pub' } } });
    const ok = await rawHttp(`${svc.http}/mcp`, { headers: { host: 'mail.example.org', 'content-type': 'application/json', accept: 'application/json' }, body });
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.body).result.structuredContent.web_url, 'https://mail.example.org/inbox/pub@ephemail.test');
    const evil = await rawHttp(`${svc.http}/mcp`, { headers: { host: 'mail.example.org.evil.example', 'content-type': 'application/json', accept: 'application/json' }, body });
    assert.equal(evil.status, 403);
  });
});

describe('POST /mcp behind a trusted proxy', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_PUBLIC_URL: 'https://mail.example.org', EPHEMAIL_TRUST_PROXY: 'true' });
  });
  after(() => svc.stop());

  test('X-Forwarded-Host is the host checked; an internal upstream Host alone is refused', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const base = { 'content-type': 'application/json', accept: 'application/json' };
    const ok = await rawHttp(`${svc.http}/mcp`, { headers: { ...base, host: 'ephemail:8025', 'x-forwarded-host': 'mail.example.org' }, body });
    assert.equal(ok.status, 200);
    const evil = await rawHttp(`${svc.http}/mcp`, { headers: { ...base, host: 'mail.example.org', 'x-forwarded-host': 'evil.example.com' }, body });
    assert.equal(evil.status, 403);
    const upstream = await rawHttp(`${svc.http}/mcp`, { headers: { ...base, host: 'ephemail:8025' }, body });
    assert.equal(upstream.status, 403);
  });
});

describe('POST /mcp without a trusted proxy', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({ EPHEMAIL_PUBLIC_URL: 'https://mail.example.org' });
  });
  after(() => svc.stop());

  test('X-Forwarded-Host is ignored: Host decides', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const base = { 'content-type': 'application/json', accept: 'application/json' };
    const spoof = await rawHttp(`${svc.http}/mcp`, { headers: { ...base, host: 'evil.example.com', 'x-forwarded-host': 'mail.example.org' }, body });
    assert.equal(spoof.status, 403);
  });
});
