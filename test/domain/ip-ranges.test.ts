// The one IP-range reader and matcher (src/domain/ip-ranges.ts): EPHEMAIL_TRUST_PROXY (HTTP) and
// EPHEMAIL_SMTP_PROXY_PROTOCOL (SMTP, IMAP, POP3) and config's check of both.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ipRangeMatcher, parseIpRange } from '../../src/domain/ip-ranges.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';

test('IPv4 CIDR blocks and single addresses', () => {
  const m = ipRangeMatcher(['10.0.0.0/8', '192.0.2.7', '172.16.0.0/12', '0.0.0.0/32']);
  for (const ip of ['10.0.0.0', '10.255.255.255', '192.0.2.7', '172.31.1.1', '0.0.0.0']) assert.equal(m(ip), true, ip);
  for (const ip of ['11.0.0.1', '192.0.2.8', '172.32.0.1', '9.255.255.255']) assert.equal(m(ip), false, ip);
  assert.equal(ipRangeMatcher(['0.0.0.0/0'])('203.0.113.9'), true);
  assert.equal(ipRangeMatcher(['0.0.0.0/0'])('2001:db8::1'), false, 'an IPv4 block says nothing about IPv6');
});

test('IPv6 CIDR blocks, in any spelling of the peer', () => {
  const m = ipRangeMatcher(['fd00::/8', '2001:db8:0:1::/64', '::1']);
  for (const ip of ['fd12::1', 'FD00:0:0:0:0:0:0:1', '2001:db8:0:1:ffff::1', '2001:0db8:0000:0001::9', '::1', '0:0:0:0:0:0:0:1']) assert.equal(m(ip), true, ip);
  for (const ip of ['fe80::1', '2001:db8:0:2::1', '::2', '10.0.0.1']) assert.equal(m(ip), false, ip);
  assert.equal(ipRangeMatcher(['fe80::/10'])('fe80::1%eth0'), true, "a link-local peer's zone is not part of the match");
});

test('IPv4-mapped IPv6 addresses match their IPv4 entries, and the other way round', () => {
  const v4 = ipRangeMatcher(['10.0.0.0/8']);
  assert.equal(v4('::ffff:10.1.2.3'), true, 'dotted tail');
  assert.equal(v4('::FFFF:10.1.2.3'), true, 'upper case');
  assert.equal(v4('::ffff:a01:203'), true, 'hex tail');
  assert.equal(v4('0:0:0:0:0:ffff:a01:203'), true, 'written out');
  assert.equal(v4('::ffff:11.1.2.3'), false);
  const mapped = ipRangeMatcher(['::ffff:10.0.0.0/104']);
  assert.equal(mapped('10.9.9.9'), true, 'a mapped block covers the IPv4 peer');
  assert.equal(mapped('11.9.9.9'), false);
  assert.equal(ipRangeMatcher(['::ffff:192.0.2.7'])('192.0.2.7'), true);
});

test('peers that are not IP addresses never match', () => {
  const m = ipRangeMatcher(['0.0.0.0/0', '::/0']);
  for (const ip of [undefined, '', 'localhost', '1.2.3', '010.0.0.1', '0x0a.0.0.1', '10.0.0.1/8', '1.2.3.4 ', '::g', '1.2.3.256']) assert.equal(m(ip), false, String(ip));
});

test('entries are read strictly: a bad one is refused, never taken loosely', () => {
  for (const bad of ['', '10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/8/8', '10.0.0.0/-1', '10.0.0.0/08x', '10.0.0.0/0008', '10.1', '010.0.0.1', '0x0a.0.0.0/8', 'fe80::1%eth0', 'fe80::/10%eth0', 'example.com', '10.0.0.0 /8']) {
    assert.equal(parseIpRange(bad), null, bad);
    assert.throws(() => ipRangeMatcher([bad]), TypeError, bad);
  }
  assert.deepEqual(parseIpRange('10.0.0.0/8'), { address: '10.0.0.0', bits: 8, family: 'ipv4' });
  assert.deepEqual(parseIpRange('192.0.2.7'), { address: '192.0.2.7', bits: 32, family: 'ipv4' });
  assert.deepEqual(parseIpRange('fd00::/8'), { address: 'fd00::', bits: 8, family: 'ipv6' });
  assert.deepEqual(parseIpRange('::1'), { address: '::1', bits: 128, family: 'ipv6' });
});

test('config takes exactly what the matchers take, for both variables', () => {
  for (const name of ['EPHEMAIL_TRUST_PROXY', 'EPHEMAIL_SMTP_PROXY_PROTOCOL']) {
    assert.throws(() => loadConfig({ [name]: '10.0.0.0/8,010.0.0.1' }), ConfigError, name);
    assert.throws(() => loadConfig({ [name]: 'fe80::/10%eth0' }), ConfigError, name);
    assert.throws(() => loadConfig({ [name]: '10.0.0.0/33' }), ConfigError, name);
    const c = loadConfig({ [name]: '10.0.0.0/8, fd00::/8,::ffff:192.0.2.0/120' });
    const list = name === 'EPHEMAIL_TRUST_PROXY' ? c.trustProxy : c.smtpProxyProtocol;
    assert.deepEqual(list, ['10.0.0.0/8', 'fd00::/8', '::ffff:192.0.2.0/120']);
    const m = ipRangeMatcher(list || []);
    assert.equal(m('192.0.2.9'), true);
    assert.equal(m('::ffff:10.0.0.1'), true);
  }
});
