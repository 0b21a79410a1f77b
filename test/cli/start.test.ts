// Starting the real process (`node bin/ephemail.js serve`, what `npm start` runs): a taken port is
// one clear line with a hint and exit code 1, never a stack trace.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { spawnServe } from '../helpers/serve.ts';

test('a taken HTTP port: one line naming the port and the variable, exit 1', { timeout: 60_000 }, async () => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  const port = (blocker.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-start-'));
  try {
    const err: Error = await spawnServe(
      { EPHEMAIL_HTTP_PORT: String(port), EPHEMAIL_STORE: `sqlite:${join(dir, 'x.db')}`, EPHEMAIL_LOG_LEVEL: 'silent' },
      { cwd: dir },
    ).then(
      () => assert.fail('the service started on a taken port'),
      (e) => e,
    );
    const [first, ...rest] = err.message.split('\n');
    assert.equal(first, 'ephemail exited (1) before starting');
    const output = rest.join('\n');
    assert.match(output, new RegExp(`the HTTP port 127\\.0\\.0\\.1:${port} is already in use`));
    assert.match(output, /EPHEMAIL_HTTP_PORT=<port>/);
    assert.doesNotMatch(output, /\n\s+at /, 'no stack trace');
  } finally {
    blocker.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
