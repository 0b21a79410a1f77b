// Each request's log lines carry its request id (Fastify's reqId), though the request's logger is
// made only when it first logs (src/http/request-log.ts); a request that logs below the level logs
// nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { captureLog } from '../helpers/log.ts';
import { startService } from '../helpers/service.ts';

test('request log lines carry their own request id; lines below the level are dropped', async () => {
  const info = captureLog('info');
  const t = await startService({}, { log: info.log });
  try {
    const mint = () => t.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal((await mint()).status, 201);
    assert.equal((await t.api('/api/v1/domains')).status, 200); // logs nothing
    assert.equal((await mint()).status, 201);
    const created = info.find('api key created');
    assert.equal(created.length, 2);
    for (const line of created) assert.match(String(line.reqId), /^req-\d+$/);
    assert.notEqual(created[0].reqId, created[1].reqId, 'each request its own id');
    assert.equal(created[0].level, 30);
  } finally {
    await t.stop();
  }
  const warn = captureLog('warn');
  const quiet = await startService({}, { log: warn.log });
  try {
    const r = await quiet.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(r.status, 201);
    assert.equal(warn.find('api key created').length, 0, 'an info line under level warn is dropped');
  } finally {
    await quiet.stop();
  }
});
