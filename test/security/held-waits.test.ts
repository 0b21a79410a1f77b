// A global cap on held waits (docs/security.md): keys and MCP sessions cannot add up past what one
// node holds, HTTP `wait` and MCP `check_inbox` together.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectClient } from '../mcp/helpers.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { openStream } from '../helpers/sse.ts';
import { until } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_MAX_HELD_WAITS: '2', EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '10' });
});
after(() => svc.stop());

test('past EPHEMAIL_MAX_HELD_WAITS a wait gets 429 too_many_waiters over HTTP and isError over MCP; a freed slot is usable again', async () => {
  const mint = async () => (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
  const keys = [await mint(), await mint(), await mint()];
  const wait = (key: string, address: string, signal?: AbortSignal) =>
    svc.api(`/api/v1/inboxes/${address}/emails?wait=20`, { headers: { authorization: `Bearer ${key}` }, signal });
  const aborts = [new AbortController(), new AbortController()];
  const held = [wait(keys[0], 'h1@ephemail.test', aborts[0].signal).catch(() => null), wait(keys[1], 'h2@ephemail.test', aborts[1].signal).catch(() => null)];
  await until(() => svc.service.core.waits.held === 2, 'both waits are held');

  const third = await wait(keys[2], 'h3@ephemail.test');
  assert.equal(third.status, 429);
  const body = await third.json();
  assert.equal(body.error.type, 'too_many_waiters');
  assert.equal(third.headers.get('retry-after'), '1');

  const { client } = await connectClient(svc);
  try {
    const r = await client.callTool({ name: 'check_inbox', arguments: { address: 'h4@ephemail.test', wait_seconds: 10 } });
    assert.equal(r.isError, true);
    assert.match((r.content as { text: string }[])[0].text, /too_many_waiters/);
  } finally {
    await client.close();
  }

  aborts[0].abort();
  await held[0];
  await until(() => svc.service.core.waits.held === 1, 'the aborted wait freed its slot');
  const again = await svc.api('/api/v1/inboxes/h5@ephemail.test/emails?wait=1', { headers: { authorization: `Bearer ${keys[2]}` } });
  assert.equal(again.status, 200, 'a freed slot is used again');
  aborts[1].abort();
  await held[1];
});

test('API event streams are bounded per node too (EPHEMAIL_MAX_HELD_WAITS, counted apart from waits): the next gets 429 too_many_waiters', async () => {
  const mint = async () => (await (await svc.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key as string;
  const keys = [await mint(), await mint(), await mint()];
  const url = (n: number) => `${svc.http}/api/v1/inboxes/s${n}@ephemail.test/events`;
  const open = [await openStream(url(1), { authorization: `Bearer ${keys[0]}` }), await openStream(url(2), { authorization: `Bearer ${keys[1]}` })];
  try {
    for (const s of open) assert.equal(s.res.status, 200);
    const third = await fetch(url(3), { headers: { authorization: `Bearer ${keys[2]}` } });
    assert.equal(third.status, 429, 'a third key, with slots of its own, is refused by the node');
    const body = await third.json();
    assert.equal(body.error.type, 'too_many_waiters');
    assert.match(body.error.message, /maximum of 2 event streams/);
    assert.equal(third.headers.get('retry-after'), '1');
    await open.shift()!.close();
    // the closed stream's slot frees when the server sees the close: observed by opening
    await until(async () => {
      const s = await openStream(url(3), { authorization: `Bearer ${keys[2]}` });
      if (s.res.status === 200) open.push(s);
      else await s.close();
      return s.res.status === 200;
    }, 'a closed stream frees its place', 5000, 20);
  } finally {
    for (const s of open) await s.close();
  }
});
