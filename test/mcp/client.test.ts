// The tool endpoint driven by the official SDK client over a real socket:
// initialize, tools/list, each tool, check_inbox woken by SMTP mail, actionable isError results.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { ISO_UTC, UUID_V7 } from '../helpers/contract.ts';
import { connectClient, textOf } from './helpers.ts';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { until } from '../helpers/time.ts';

describe('tool endpoint through the SDK client', () => {
  let svc: TestService;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  before(async () => {
    svc = await startService({ EPHEMAIL_DOMAINS: 'ephemail.test,second.test' });
    ({ client, transport } = await connectClient(svc));
  });
  after(async () => {
    await client.close();
    await svc.stop();
  });

  test('initialize: latest protocol, tools capability, server info, a signed session id', () => {
    assert.equal(transport.protocolVersion, '2025-11-25');
    assert.ok(client.getServerCapabilities()?.tools, 'tools capability');
    assert.equal(client.getServerVersion()?.name, 'ephemail');
    assert.match(client.getInstructions() ?? '', /untrusted/i);
    assert.match(transport.sessionId ?? '', /^[A-Za-z0-9_-]{22}\.[0-9a-z]{1,10}\.[A-Za-z0-9_-]{22}$/, 'the client holds the Mcp-Session-Id from initialize');
  });

  test('tools/list: three read-only tools with input and output schemas', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['create_inbox', 'check_inbox', 'read_email']);
    for (const t of tools) {
      assert.equal(t.annotations?.readOnlyHint, true, `${t.name} readOnlyHint`);
      assert.equal(t.annotations?.destructiveHint, false, `${t.name} destructiveHint`);
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(t.outputSchema?.type, 'object', `${t.name} outputSchema`);
      assert.ok(t.description && t.description.length > 40);
    }
    const [create, check, read] = tools;
    assert.deepEqual(Object.keys(create.inputSchema.properties ?? {}).sort(), ['domain', 'name']);
    assert.deepEqual(create.inputSchema.required ?? [], []);
    assert.deepEqual(Object.keys(create.outputSchema?.properties ?? {}).sort(), ['address', 'available_domains', 'mail_ttl_seconds', 'web_url']);
    assert.deepEqual(Object.keys(check.inputSchema.properties ?? {}).sort(), ['address', 'from', 'since_id', 'subject', 'wait_seconds']);
    assert.deepEqual(check.inputSchema.required, ['address']);
    const wait = (check.inputSchema.properties as any).wait_seconds;
    assert.equal(wait.type, 'integer');
    assert.equal(wait.minimum, 0);
    assert.equal(wait.maximum, 20);
    assert.deepEqual(Object.keys(check.outputSchema?.properties ?? {}).sort(), ['address', 'count', 'emails', 'newest_id', 'web_url']);
    assert.equal((check.outputSchema?.properties as any).emails.maxItems, 20);
    assert.deepEqual(Object.keys((check.outputSchema?.properties as any).emails.items.properties).sort(), ['from', 'has_attachments', 'id', 'received_at', 'subject']);
    assert.deepEqual(read.inputSchema.required, ['email_id']);
    // the contract's fields (more views may add theirs: test/http/email-views.test.ts checks results against this schema)
    const readProps = Object.keys(read.outputSchema?.properties ?? {});
    for (const k of ['address', 'attachments', 'authentication', 'body', 'body_truncated', 'codes', 'expires_at', 'from', 'id', 'links', 'received_at', 'subject']) assert.ok(readProps.includes(k), k);
    assert.deepEqual(Object.keys((read.outputSchema?.properties as any).attachments.items.properties).sort(), ['content_type', 'download_url', 'filename', 'size_bytes']);
  });

  test('create_inbox: random 8-character name at the first domain, web_url, ttl, domains', async () => {
    const r = await client.callTool({ name: 'create_inbox', arguments: {} });
    assert.equal(r.isError, undefined);
    const s = r.structuredContent as any;
    assert.match(s.address, /^[a-z0-9]{8}@ephemail\.test$/);
    assert.equal(s.web_url, `${svc.http.replace('127.0.0.1', 'localhost')}/inbox/${s.address}`);
    assert.equal(s.mail_ttl_seconds, 3600);
    assert.deepEqual(s.available_domains, ['ephemail.test', 'second.test']);
    assert.ok(textOf(r).includes(s.address));

    const named = (await client.callTool({ name: 'create_inbox', arguments: { domain: 'Second.Test', name: 'Alice.Test' } })).structuredContent as any;
    assert.equal(named.address, 'alice.test@second.test');
  });

  test('create_inbox: an unknown domain is an isError result naming the domains', async () => {
    const r = await client.callTool({ name: 'create_inbox', arguments: { domain: 'nope.example' } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent, undefined);
    assert.match(textOf(r), /nope\.example/);
    assert.match(textOf(r), /ephemail\.test, second\.test/);
  });

  test('check_inbox is woken by mail sent over SMTP during its wait; read_email reads it', async () => {
    const address = ((await client.callTool({ name: 'create_inbox', arguments: {} })).structuredContent as any).address as string;
    const t0 = Date.now();
    const pending = client.callTool({ name: 'check_inbox', arguments: { address: address.toUpperCase(), wait_seconds: 15 } });
    await until(() => svc.service.core.waits.held === 1, 'check_inbox is held');
    await svc.send({ from: 'Shop <noreply@shop.example>', to: address, subject: 'Verify your account', text: 'Your code is 482913.\n\nThanks, the Shop team' });
    const r = await pending;
    const elapsed = Date.now() - t0;
    // bound: woken by the delivery, not the 15 s deadline; one-sided
    assert.ok(elapsed < 10_000, `woken by the delivery, not the deadline (${elapsed} ms)`);
    assert.equal(r.isError, undefined);
    const s = r.structuredContent as any;
    assert.equal(s.address, address);
    assert.equal(s.count, 1);
    assert.equal(s.emails.length, 1);
    const e = s.emails[0];
    assert.match(e.id, UUID_V7);
    assert.equal(s.newest_id, e.id);
    assert.equal(e.from, 'Shop <noreply@shop.example>');
    assert.equal(e.subject, 'Verify your account');
    assert.match(e.received_at, ISO_UTC);
    assert.equal(e.has_attachments, false);
    assert.match(textOf(r), /Verify your account/);

    const m = await client.callTool({ name: 'read_email', arguments: { email_id: e.id } });
    const full = m.structuredContent as any;
    assert.equal(full.id, e.id);
    assert.equal(full.address, address);
    assert.equal(full.from, 'Shop <noreply@shop.example>');
    assert.equal(full.subject, 'Verify your account');
    assert.match(full.received_at, ISO_UTC);
    assert.equal(Date.parse(full.expires_at) - Date.parse(full.received_at), 3600_000);
    assert.equal(full.body, 'Your code is 482913.\n\nThanks, the Shop team');
    assert.equal(full.body_truncated, false);
    assert.deepEqual(full.attachments, []);
    const text = textOf(m);
    assert.match(text, /untrusted/i);
    assert.ok(text.endsWith('BEGIN EMAIL BODY\nYour code is 482913.\n\nThanks, the Shop team\nEND EMAIL BODY'), text);
  });

  test('check_inbox: since_id waits for newer mail only, oldest first; an empty result echoes since_id', async () => {
    const address = 'since@ephemail.test';
    for (const n of [1, 2, 3]) await svc.send({ to: address, subject: `m${n}`, text: `message ${n}` });
    const all = (await client.callTool({ name: 'check_inbox', arguments: { address } })).structuredContent as any;
    assert.deepEqual(all.emails.map((e: any) => e.subject), ['m3', 'm2', 'm1'], 'newest first without since_id');
    assert.equal(all.newest_id, all.emails[0].id);

    const t0 = Date.now();
    const none = await client.callTool({ name: 'check_inbox', arguments: { address, since_id: all.newest_id, wait_seconds: 1 } });
    // bound: held for wait_seconds (a lower bound: a loaded machine only makes it longer)
    assert.ok(Date.now() - t0 >= 900, 'held for wait_seconds');
    const ns = none.structuredContent as any;
    assert.equal(ns.count, 0);
    assert.deepEqual(ns.emails, []);
    assert.equal(ns.newest_id, all.newest_id, 'newest_id echoes since_id');
    assert.match(textOf(none), new RegExp(`since_id "${all.newest_id}"`));

    const older = (await client.callTool({ name: 'check_inbox', arguments: { address, since_id: all.emails[2].id } })).structuredContent as any;
    assert.deepEqual(older.emails.map((e: any) => e.subject), ['m2', 'm3'], 'oldest first with since_id');
    assert.equal(older.newest_id, all.emails[0].id);

    const empty = (await client.callTool({ name: 'check_inbox', arguments: { address: 'nobody-here@ephemail.test' } })).structuredContent as any;
    assert.equal(empty.count, 0);
    assert.equal(empty.newest_id, '', 'no mail and no since_id: ""');
    const again = (await client.callTool({ name: 'check_inbox', arguments: { address: 'nobody-here@ephemail.test', since_id: empty.newest_id } })).structuredContent as any;
    assert.equal(again.count, 0, '"" passed back as since_id is no cursor');
    assert.equal(again.newest_id, '');
  });

  test('check_inbox returns at most 20 emails', async () => {
    const address = 'many@ephemail.test';
    for (let n = 0; n < 23; n++) await svc.send({ to: address, subject: `n${n}`, text: 'x' });
    const s = (await client.callTool({ name: 'check_inbox', arguments: { address } })).structuredContent as any;
    assert.equal(s.count, 20);
    assert.equal(s.emails.length, 20);
    assert.equal(s.emails[0].subject, 'n22');
  });

  test('check_inbox: unknown domain, malformed address and bad since_id are actionable isError results', async () => {
    const unknown = await client.callTool({ name: 'check_inbox', arguments: { address: 'a@elsewhere.example' } });
    assert.equal(unknown.isError, true);
    assert.match(textOf(unknown), /elsewhere\.example is not a domain of this service; active domains: ephemail\.test, second\.test/);
    const bad = await client.callTool({ name: 'check_inbox', arguments: { address: 'not an address' } });
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /invalid_request/);
    const since = await client.callTool({ name: 'check_inbox', arguments: { address: 'a@ephemail.test', since_id: 'yesterday' } });
    assert.equal(since.isError, true);
    assert.match(textOf(since), /since_id must be an email id/);
    const wait = await client.callTool({ name: 'check_inbox', arguments: { address: 'a@ephemail.test', wait_seconds: 21 } });
    assert.equal(wait.isError, true);
    assert.match(textOf(wait), /wait_seconds/);
  });

  test('read_email: a missing or expired email is an isError result that says what to do', async () => {
    for (const id of ['0190a0a0-0000-7000-8000-000000000000', 'not-an-id']) {
      const r = await client.callTool({ name: 'read_email', arguments: { email_id: id } });
      assert.equal(r.isError, true);
      assert.match(textOf(r), /not_found/);
      assert.match(textOf(r), /check_inbox/);
    }
  });

  test('read_email: attachments carry download_url on the public base', async () => {
    const address = 'att@ephemail.test';
    await svc.send({ to: address, subject: 'with file', text: 'see attached', attachments: [{ filename: 'report.txt', content: 'hello', contentType: 'text/plain' }] });
    const list = (await client.callTool({ name: 'check_inbox', arguments: { address } })).structuredContent as any;
    assert.equal(list.emails[0].has_attachments, true);
    const r = (await client.callTool({ name: 'read_email', arguments: { email_id: list.emails[0].id } })).structuredContent as any;
    assert.equal(r.attachments.length, 1);
    const a = r.attachments[0];
    assert.equal(a.filename, 'report.txt');
    assert.match(a.content_type, /^text\/plain/);
    assert.equal(a.size_bytes, 5);
    assert.match(a.download_url, new RegExp(`/api/v1/emails/${r.id}/attachments/`));
    const bytes = await fetch(a.download_url.replace('localhost', '127.0.0.1'));
    assert.equal(await bytes.text(), 'hello');
  });

  test('an unknown tool is a JSON-RPC -32602 error, not a result', async () => {
    await assert.rejects(client.callTool({ name: 'send_email', arguments: {} }), (err: any) => err.code === -32602 && /Unknown tool/.test(err.message));
  });

  test('ping', async () => {
    assert.deepEqual(await client.ping(), {});
  });
});
