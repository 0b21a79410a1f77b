// Client buckets (domain/limits.ts): IPv6 clients count at /64, /56 and /48, so one site holding
// many /64s cannot take every connection or stream slot.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHoldCounter, ipBucket, ipBuckets, shareFairly } from '../../src/domain/limits.ts';

test('ipBuckets: IPv4 alone; IPv6 by /64, /56 and /48, however the address is written', () => {
  assert.deepEqual(ipBuckets('203.0.113.7'), ['ip:203.0.113.7']);
  assert.deepEqual(ipBuckets('::ffff:203.0.113.7'), ['ip:203.0.113.7']);
  assert.deepEqual(ipBuckets('2001:db8:abcd:12ff:1:2:3:4'), ['ip6:2001:db8:abcd:12ff::/64', 'ip6:2001:db8:abcd:1200::/56', 'ip6:2001:db8:abcd::/48']);
  assert.deepEqual(ipBuckets('2001:DB8:ABCD:0012::1'), ['ip6:2001:db8:abcd:12::/64', 'ip6:2001:db8:abcd:0::/56', 'ip6:2001:db8:abcd::/48']);
  assert.deepEqual(ipBuckets('2001:db8::1'), ['ip6:2001:db8:0:0::/64', 'ip6:2001:db8:0:0::/56', 'ip6:2001:db8:0::/48']);
  assert.equal(ipBucket('2001:db8:abcd:12ff:ffff::1'), 'ip6:2001:db8:abcd:12ff::/64', 'the rate-limit bucket stays the /64');
});

test('a /56 cannot take every slot by spreading over its /64s; other networks are unaffected', () => {
  const caps = createHoldCounter({ perAddress: 2, per56: 4, per48: 6 });
  const releases: (() => void)[] = [];
  // one /56, four /64s inside it: 4 slots in all, although each /64 alone would allow 2
  for (let i = 0; i < 4; i++) releases.push(caps.take(`2001:db8:abcd:12${i.toString(16).padStart(2, '0')}::1`)!);
  assert.equal(caps.take('2001:db8:abcd:1210::1'), null, 'the /56 is full');
  // another /56 of the same /48: 2 more until the /48 is full
  assert.ok(caps.take('2001:db8:abcd:3400::1'));
  assert.ok(caps.take('2001:db8:abcd:3400::2'));
  assert.equal(caps.take('2001:db8:abcd:3400::3'), null, 'its /64 is full');
  assert.equal(caps.take('2001:db8:abcd:5600::1'), null, 'the /48 is full');
  assert.ok(caps.take('2001:db8:ffff::1'), 'another /48 is free');
  assert.ok(caps.take('198.51.100.1'));
  assert.ok(caps.take('198.51.100.1'));
  assert.equal(caps.take('198.51.100.1'), null, 'an IPv4 address has its own cap');
  releases[0]();
  releases[0](); // twice is once
  assert.ok(caps.take('2001:db8:abcd:1210::1'), 'a released slot is free again');
  assert.equal(caps.take('2001:db8:abcd:1211::1'), null, 'and then full again');
});

test('shareFairly: up to max, round-robin across groups in the order of their first item; the rest left in order', () => {
  const key = (s: string) => s[0];
  const cases: [string[], number, string[], string[]][] = [
    [['a1', 'a2', 'b1'], 5, ['a1', 'a2', 'b1'], []], // under the cap: everything, as given
    [['a1', 'a2', 'a3', 'a4', 'b1', 'c1', 'c2'], 4, ['a1', 'b1', 'c1', 'a2'], ['a3', 'a4', 'c2']],
    [['a1', 'a2', 'a3', 'b1'], 2, ['a1', 'b1'], ['a2', 'a3']], // one key's many cannot crowd out another's one
    [['b1', 'a1', 'b2', 'a2', 'b3'], 3, ['b1', 'a1', 'b2'], ['a2', 'b3']],
    [['a1', 'a2'], 0, [], ['a1', 'a2']],
  ];
  for (const [items, max, taken, left] of cases) {
    assert.deepEqual(shareFairly(items, key, max), { taken, left }, `${items.join(',')} max ${max}`);
  }
  // 300 keys of 10 events each, 100 slots: each of the first 100 keys gets one
  const many = Array.from({ length: 3000 }, (_, i) => `k${Math.floor(i / 10)}-${i % 10}`);
  const r = shareFairly(many, (s) => s.split('-')[0], 100);
  assert.equal(r.taken.length, 100);
  assert.equal(new Set(r.taken.map((s) => s.split('-')[0])).size, 100);
  assert.equal(r.left.length, 2900);
});
