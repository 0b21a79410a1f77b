// Client buckets (domain/limits.ts): IPv6 clients count at /64, /56 and /48, so one site holding
// many /64s cannot take every connection or stream slot.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHoldCounter, ipBucket, ipBuckets } from '../../src/domain/limits.ts';

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
