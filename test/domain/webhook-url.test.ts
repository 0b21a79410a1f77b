// The SSRF classifier of webhook receivers (docs/security.md): only public unicast addresses. The
// IPv6 `::/8` block is IANA-reserved: its forms that embed an IPv4 address (`::a.b.c.d`,
// `::a00:1`) used to pass as "unicast"; only IPv4-mapped `::ffff:a.b.c.d` is judged as its IPv4.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isPublicAddress } from '../../src/domain/webhook-url.ts';

test('::/8 forms are refused whatever they embed; IPv4-mapped is judged as its IPv4', () => {
  for (const ip of ['::127.0.0.1', '::10.0.0.1', '::a00:1', '::169.254.169.254', '::a9fe:a9fe', '::8.8.8.8', '::1:7f00:1', '0:0:0:0:0:1:7f00:1', '::1', '::', 'ff::1']) {
    assert.equal(isPublicAddress(ip), false, ip);
  }
  assert.equal(isPublicAddress('::ffff:127.0.0.1'), false, 'mapped loopback');
  assert.equal(isPublicAddress('::ffff:10.0.0.1'), false, 'mapped private');
  assert.equal(isPublicAddress('::ffff:8.8.8.8'), true, 'mapped public IPv4 is that IPv4');
});

test('public unicast passes; private, metadata, 6to4, Teredo and NAT64 forms do not', () => {
  for (const ip of ['8.8.8.8', '2606:4700::1111', '2a00:1450:4001::1']) assert.equal(isPublicAddress(ip), true, ip);
  for (const ip of ['10.0.0.1', '169.254.169.254', 'fd00:ec2::254', 'fe80::1', '2002:7f00:1::', '2001::1', '64:ff9b::7f00:1', '100.64.0.1', 'not an ip']) {
    assert.equal(isPublicAddress(ip), false, ip);
  }
});
