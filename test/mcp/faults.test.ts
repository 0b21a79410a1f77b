// Infrastructure faults on the tool endpoint: a store that cannot be reached gives an isError
// result saying to retry (never a hang or a stack trace); a limiter that fails gives a JSON-RPC
// internal error (-32603), never the /api/v1 envelope.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import type { Limiter } from '../../src/limiter/limiter.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import type { Store } from '../../src/store/store.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { callRaw, rpc } from './helpers.ts';

describe('tool endpoint faults', () => {
  let svc: TestService;
  const state = { storeDown: false, limiterDown: false };
  before(async () => {
    const real = createSqliteStore(':memory:');
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function' || prop === 'close') return v;
        return (...args: unknown[]) => {
          if (state.storeDown) return Promise.reject(new StoreUnavailableError('connection refused'));
          return v.apply(target, args);
        };
      },
    }) as Store;
    const realLimiter = createMemoryLimiter();
    const limiter: Limiter = {
      ...realLimiter,
      hit: (...args) => (state.limiterDown ? Promise.reject(new StoreUnavailableError('limiter down')) : realLimiter.hit(...args)),
      peek: (...args) => realLimiter.peek(...args),
      acquireWait: (...args) => realLimiter.acquireWait(...args),
      close: () => realLimiter.close(),
    };
    svc = await startService({}, { backends: { store, bus: createMemoryBus(), limiter } });
  });
  after(() => svc.stop());

  test('store unreachable: each tool answers isError internal_error with a retry hint', async () => {
    state.storeDown = true;
    try {
      for (const [name, args] of [
        ['create_inbox', {}],
        ['check_inbox', { address: 'x@ephemail.test', wait_seconds: 2 }],
        ['read_email', { email_id: '0190a0a0-0000-7000-8000-000000000000' }],
      ] as const) {
        const t0 = Date.now();
        const r = await callRaw(svc, name, args);
        // bound: a failing store is reported at once, not after check_inbox's 2 s wait or a timeout; one-sided, generous
        assert.ok(Date.now() - t0 < 10_000, `${name} answers promptly`);
        assert.equal(r.result.isError, true, name);
        assert.match(r.result.content[0].text, /^Error \(internal_error\): The store is unreachable\. Retry after 5 s\./, name);
        assert.doesNotMatch(r.result.content[0].text, /connection refused|at .+:\d+/);
      }
    } finally {
      state.storeDown = false;
    }
    assert.equal((await callRaw(svc, 'create_inbox', {})).result.isError, undefined, 'recovers');
  });

  test('limiter unreachable: JSON-RPC -32603, not the /api/v1 envelope', async () => {
    state.limiterDown = true;
    try {
      const res = await rpc(svc, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
      assert.equal(res.status, 500);
      const body = await res.json();
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.error.code, -32603);
      assert.equal(body.error.type, undefined);
    } finally {
      state.limiterDown = false;
    }
  });
});
