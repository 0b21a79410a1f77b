// A taken IMAP or POP3 port at start (Mailpit serves POP3 on 1110 too): one line naming the port, the
// variable and `off`, exit 1, no stack trace (src/start-hint.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { spawnServe } from '../helpers/serve.ts';

test('a taken POP3 port: one line naming the port, EPHEMAIL_POP3_PORT and off, exit 1', { timeout: 60_000 }, async () => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  const port = (blocker.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-start-'));
  try {
    const err: Error = await spawnServe(
      { EPHEMAIL_POP3_PORT: String(port), EPHEMAIL_STORE: `sqlite:${join(dir, 'x.db')}`, EPHEMAIL_LOG_LEVEL: 'silent' },
      { cwd: dir },
    ).then(
      () => assert.fail('the service started on a taken port'),
      (e) => e,
    );
    const output = err.message.split('\n').slice(1).join('\n');
    assert.match(output, new RegExp(`the POP3 port 127\\.0\\.0\\.1:${port} is already in use`));
    assert.match(output, /EPHEMAIL_POP3_PORT=<port> npm start \(or EPHEMAIL_POP3_PORT=off\)/);
    assert.doesNotMatch(output, /\n\s+at /, 'no stack trace');
  } finally {
    blocker.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
