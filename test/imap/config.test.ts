// EPHEMAIL_IMAP_PORT / EPHEMAIL_POP3_PORT: a port, 0 for a free one, off for none; anything else refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { startService } from '../helpers/service.ts';

test('ports: defaults 1143 and 1110, 0, off; junk refused naming the variable', () => {
  const d = loadConfig({});
  assert.deepEqual([d.imapHost, d.imapPort, d.pop3Host, d.pop3Port], ['127.0.0.1', 1143, '127.0.0.1', 1110]);
  assert.equal(loadConfig({ EPHEMAIL_IMAP_PORT: 'off' }).imapPort, null);
  assert.equal(loadConfig({ EPHEMAIL_POP3_PORT: ' OFF ' }).pop3Port, null);
  assert.equal(loadConfig({ EPHEMAIL_IMAP_PORT: '0' }).imapPort, 0);
  assert.throws(() => loadConfig({ EPHEMAIL_IMAP_PORT: 'imap' }), /EPHEMAIL_IMAP_PORT.*or off/);
  assert.throws(() => loadConfig({ EPHEMAIL_POP3_PORT: '70000' }), /EPHEMAIL_POP3_PORT/);
});

test('off: no listener, no endpoint in GET /api/v1', async () => {
  const svc = await startService({ EPHEMAIL_IMAP_PORT: 'off', EPHEMAIL_POP3_PORT: 'off' });
  try {
    assert.equal(svc.service.imap, null);
    assert.equal(svc.service.pop3, null);
    assert.equal(svc.imapPort, 0);
    const d = ((await (await svc.api('/api/v1')).json()) as { data: { mail_access: unknown } }).data;
    assert.deepEqual(d.mail_access, { imap: null, pop3: null });
    assert.doesNotMatch(await (await svc.api('/inbox/x@ephemail.test')).text(), /Open in a mail client/);
  } finally {
    await svc.stop();
  }
});
