// Starting the real process (`node bin/ephemail.js serve`, what `npm start` runs): a taken port is
// one clear line with a hint and exit code 1, never a stack trace.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const BIN = resolve(import.meta.dirname, '../../bin/ephemail.js');

test('a taken HTTP port: one line naming the port and the variable, exit 1', { timeout: 60_000 }, async () => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  const port = (blocker.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-start-'));
  try {
    const child = spawn(process.execPath, [BIN, 'serve'], {
      cwd: dir,
      env: { ...process.env, EPHEMAIL_HTTP_PORT: String(port), EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_STORE: `sqlite:${join(dir, 'x.db')}`, EPHEMAIL_LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`the HTTP port 127\\.0\\.0\\.1:${port} is already in use`));
    assert.match(stderr, /EPHEMAIL_HTTP_PORT=<port>/);
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
  } finally {
    blocker.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
