// check_inbox's hold (spec: check_inbox wait_seconds; docs/house-style.md: HTTP `wait` and check_inbox
// share one wait path): returns at once when mail exists, ends when the client goes away, is answered
// on shutdown, and a session holds at most MCP_CONCURRENT_WAITS of them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MCP_CONCURRENT_WAITS } from '../../src/mcp/tools/check-inbox.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { until } from '../helpers/time.ts';
import { callRaw, INIT_PARAMS, rpc } from './helpers.ts';


describe('check_inbox wait', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService();
  });
  after(() => svc.stop());

  test('existing mail and no since_id: returns at once even with wait_seconds', async () => {
    await svc.send({ to: 'has-mail@ephemail.test', subject: 'old', text: 'x' });
    const t0 = Date.now();
    const r = await callRaw(svc, 'check_inbox', { address: 'has-mail@ephemail.test', wait_seconds: 20 });
    // bound: existing mail answers at once, not after the 20 s wait; one-sided, generous for a loaded machine
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(r.result.structuredContent.count, 1);
  });

  test('a client that goes away ends its hold on the server', async () => {
    const abort = new AbortController();
    const pending = fetch(`${svc.http}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'check_inbox', arguments: { address: 'gone@ephemail.test', wait_seconds: 20 } } }),
      signal: abort.signal,
    }).catch(() => null);
    await until(() => svc.service.core.waits.held === 1, 'one check_inbox is held', 3000);
    abort.abort();
    await pending;
    await until(() => svc.service.core.waits.held === 0, 'no check_inbox is held', 2000);
  });

  test(`a session holds at most ${MCP_CONCURRENT_WAITS} waits; one more is an actionable isError`, async () => {
    const init = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() });
    const session = init.headers.get('mcp-session-id')!;
    const held = Array.from({ length: MCP_CONCURRENT_WAITS }, (_, i) => callRaw(svc, 'check_inbox', { address: `slot${i}@ephemail.test`, wait_seconds: 3 }, { 'mcp-session-id': session }));
    await until(() => svc.service.core.waits.held === MCP_CONCURRENT_WAITS, 'the session holds its maximum', 3000);
    const extra = await callRaw(svc, 'check_inbox', { address: 'slot-extra@ephemail.test', wait_seconds: 3 }, { 'mcp-session-id': session });
    assert.equal(extra.result.isError, true);
    assert.match(extra.result.content[0].text, /^Error \(too_many_waiters\): 5 check_inbox calls with wait_seconds are already waiting/);
    // another session is not affected, and a call without wait_seconds needs no slot
    const other = (await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT_PARAMS() })).headers.get('mcp-session-id')!;
    const quick = await callRaw(svc, 'check_inbox', { address: 'slot-extra@ephemail.test' }, { 'mcp-session-id': session });
    assert.equal(quick.result.isError, undefined);
    const otherWait = callRaw(svc, 'check_inbox', { address: 'slot-other@ephemail.test', wait_seconds: 1 }, { 'mcp-session-id': other });
    const results = await Promise.all([...held, otherWait]);
    for (const r of results) assert.equal(r.result.structuredContent.count, 0);
  });
});

describe('check_inbox on shutdown', () => {
  test('a held check_inbox is answered with its empty result when the service stops', async () => {
    const svc = await startService();
    const t0 = Date.now();
    const pending = callRaw(svc, 'check_inbox', { address: 'shutdown@ephemail.test', wait_seconds: 20 });
    await until(() => svc.service.core.waits.held === 1, 'one check_inbox is held', 3000);
    await svc.stop();
    const r = await pending;
    // bound: stop() answers the 20 s wait, not its deadline; one-sided, generous
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(r.result.structuredContent.count, 0);
    assert.deepEqual(r.result.structuredContent.emails, []);
  });
});
