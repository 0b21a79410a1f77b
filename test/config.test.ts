// loadConfig: the environment, read once and checked (src/config.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig, PRIVATE_PROXY_RANGES } from '../src/config.ts';

test('defaults', () => {
  const c = loadConfig({});
  assert.equal(c.httpPort, 8025);
  assert.equal(c.smtpPort, 1025);
  assert.deepEqual(c.domains, ['ephemail.test']);
  assert.equal(c.trustProxy, false);
  assert.equal(c.sessionSecret, null);
  assert.ok(Object.isFrozen(c));
});

test('EPHEMAIL_TRUST_PROXY: false, true (loopback and private networks) or a list of addresses and CIDR blocks', () => {
  assert.equal(loadConfig({ EPHEMAIL_TRUST_PROXY: 'false' }).trustProxy, false);
  assert.deepEqual(loadConfig({ EPHEMAIL_TRUST_PROXY: 'true' }).trustProxy, PRIVATE_PROXY_RANGES);
  assert.deepEqual(loadConfig({ EPHEMAIL_TRUST_PROXY: ' 10.1.2.3, 192.168.0.0/16,2001:db8::/32 ' }).trustProxy, ['10.1.2.3', '192.168.0.0/16', '2001:db8::/32']);
  for (const bad of ['yes please', '10.0.0.0/33', 'lb.example.com', '10.0.0.1/8/1', '::1/129']) {
    assert.throws(() => loadConfig({ EPHEMAIL_TRUST_PROXY: bad }), (e: Error) => e instanceof ConfigError && e.message.includes('EPHEMAIL_TRUST_PROXY'), bad);
  }
});

test('EPHEMAIL_SESSION_SECRET must be at least 32 bytes, and the error never prints it', () => {
  assert.equal(loadConfig({ EPHEMAIL_SESSION_SECRET: 'x'.repeat(32) }).sessionSecret, 'x'.repeat(32));
  assert.throws(() => loadConfig({ EPHEMAIL_SESSION_SECRET: 'short-secret' }), (e: Error) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /EPHEMAIL_SESSION_SECRET/);
    assert.match(e.message, /at least 32 bytes/);
    assert.doesNotMatch(e.message, /short-secret/);
    return true;
  });
});

test('EPHEMAIL_ADMIN_TOKEN: unset keeps the admin API off; shorter than 32 characters stops start-up naming it, never printing it', () => {
  assert.equal(loadConfig({}).adminToken, null);
  assert.equal(loadConfig({ EPHEMAIL_ADMIN_TOKEN: ' ' }).adminToken, null);
  assert.equal(loadConfig({ EPHEMAIL_ADMIN_TOKEN: 'a'.repeat(32) }).adminToken, 'a'.repeat(32));
  for (const bad of ['too-short-admin-token', 'x'.repeat(31), `${'x'.repeat(20)} ${'y'.repeat(20)}`]) {
    assert.throws(() => loadConfig({ EPHEMAIL_ADMIN_TOKEN: bad }), (e: Error) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /^EPHEMAIL_ADMIN_TOKEN=.* at least 32 characters/);
      assert.ok(!e.message.includes(bad), 'the value is not printed');
      return true;
    });
  }
});

test('a bad value names its variable', () => {
  assert.throws(() => loadConfig({ EPHEMAIL_HTTP_PORT: '70000' }), /EPHEMAIL_HTTP_PORT/);
  assert.throws(() => loadConfig({ EPHEMAIL_DOMAINS: 'not a domain' }), /EPHEMAIL_DOMAINS/);
  assert.throws(() => loadConfig({ EPHEMAIL_STORE: 'mysql://x' }), /EPHEMAIL_STORE/);
});

test('EPHEMAIL_SMTP_PROXY_PROTOCOL: unset is off; a list of addresses and CIDR blocks; anything else names the variable', () => {
  assert.deepEqual(loadConfig({}).smtpProxyProtocol, []);
  assert.deepEqual(loadConfig({ EPHEMAIL_SMTP_PROXY_PROTOCOL: '' }).smtpProxyProtocol, []);
  assert.deepEqual(loadConfig({ EPHEMAIL_SMTP_PROXY_PROTOCOL: ' 10.0.0.0/8, 192.0.2.7,fd00::/8 ' }).smtpProxyProtocol, ['10.0.0.0/8', '192.0.2.7', 'fd00::/8']);
  for (const bad of ['true', 'lb.example.com', '10.0.0.0/33', '::1/129', '10.0.0.1/8/1', ',', '10.0.0.0/x']) {
    assert.throws(() => loadConfig({ EPHEMAIL_SMTP_PROXY_PROTOCOL: bad }), (e: Error) => e instanceof ConfigError && e.message.includes('EPHEMAIL_SMTP_PROXY_PROTOCOL'), bad);
  }
});

test('EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE / _PER_ADDRESS_PER_MINUTE: off (0) unless set', () => {
  assert.deepEqual({ ...loadConfig({}).smtpCaps }, { perIpPerMinute: 0, perAddressPerMinute: 0 });
  const c = loadConfig({ EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '30', EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: '10' });
  assert.deepEqual({ ...c.smtpCaps }, { perIpPerMinute: 30, perAddressPerMinute: 10 });
  assert.throws(() => loadConfig({ EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE: '-1' }), /EPHEMAIL_LIMIT_SMTP_PER_IP_PER_MINUTE/);
  assert.throws(() => loadConfig({ EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE: 'lots' }), /EPHEMAIL_LIMIT_SMTP_PER_ADDRESS_PER_MINUTE/);
});
