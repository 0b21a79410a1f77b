// Webhook host names cannot tie up the process's lookup threads (docs/security.md, issue 23 finding
// 7): every lookup of a webhook's host runs through boundedResolve — at most LOOKUPS_AT_ONCE at a
// time on a node, each answered (or failed with ETIMEOUT) within its timeout, and a lookup that hangs
// keeps its place until it really ends, so a resolver that never answers holds at most two of
// libuv's four threads. And a name that does not exist is refused at registration (it was accepted).
// Resolvers here are injected: no test asks the system resolver about an outside name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LOOKUPS_AT_ONCE, boundedResolve, checkDestination, type ResolvedAddress } from '../../src/services/webhook-send.ts';

test('a resolver that never answers: callers get ETIMEOUT in time, and at most LOOKUPS_AT_ONCE lookups ever run', async () => {
  assert.equal(LOOKUPS_AT_ONCE, 2);
  let started = 0;
  const release: (() => void)[] = [];
  const hanging = (host: string) => {
    started++;
    return new Promise<ResolvedAddress[]>((done) => release.push(() => done([{ address: '192.0.2.1', family: 4 }])));
  };
  const resolve = boundedResolve(hanging, 2, 200);
  const t0 = performance.now();
  const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => resolve(`hook${i}.example`)));
  const elapsed = performance.now() - t0;
  assert.ok(results.every((r) => r.status === 'rejected' && (r.reason as NodeJS.ErrnoException).code === 'ETIMEOUT'), 'every caller is told it timed out');
  // bound: answered at the 200 ms timeout, not held by the hanging lookups (forever); one-sided, generous
  assert.ok(elapsed < 5000, `answered within the timeout, not held (${elapsed.toFixed(0)} ms)`);
  assert.equal(started, 2, 'only two lookups were started: the others waited their turn and gave up');
  assert.equal(resolve.running, 2, 'the hanging lookups keep their places until they end');
  // once the hung lookups end, the places are free again
  for (const r of release.splice(0)) r();
  await new Promise((r) => setImmediate(r));
  assert.equal(resolve.running, 0);
  const fresh = boundedResolve(async () => [{ address: '192.0.2.7', family: 4 }], 2, 200);
  assert.deepEqual(await fresh('ok.example'), [{ address: '192.0.2.7', family: 4 }]);
});

test('lookups beyond the bound wait their turn and are answered once a place frees', async () => {
  let inFlight = 0;
  let most = 0;
  const slow = async (host: string) => {
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise((r) => setTimeout(r, 20)); // slow on purpose: a lookup that takes 20 ms keeps its place meanwhile
    inFlight--;
    return [{ address: '192.0.2.9', family: 4 }];
  };
  const resolve = boundedResolve(slow, 2, 2000);
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => resolve(`q${i}.example`)));
  assert.equal(answers.length, 10);
  assert.equal(most, 2, 'never more than two at once');
});

test('registration: a name that does not exist is refused; one that cannot be resolved right now is kept for delivery to check', async () => {
  const notFound = async () => { throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }); };
  const refused = await checkDestination('https://no-such-host.example/hook', false, notFound);
  assert.match(refused ?? '', /no-such-host\.example does not resolve to any address/);
  const timedOut = async () => { throw Object.assign(new Error('timed out'), { code: 'ETIMEOUT' }); };
  assert.equal(await checkDestination('https://slow-dns.example/hook', false, timedOut), null);
  const publicAnswer = async () => [{ address: '192.0.2.10', family: 4 }];
  assert.match((await checkDestination('https://doc.example/hook', false, publicAnswer)) ?? '', /not a public address/, 'documentation ranges stay refused');
});
