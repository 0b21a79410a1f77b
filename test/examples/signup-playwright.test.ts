// The README's "Testing a sign-up flow" example runs as written: Playwright (Debian's Chromium) signs
// up in the tiny example app with the `inbox` fixture of @ephemail/client/playwright, waits for the
// code over a real ephemail (npm start's entry) and sees "verified".
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { freePort } from '../helpers/serve.ts';

const ROOT = resolve(import.meta.dirname, '../..');
test('examples/signup-playwright passes', { timeout: 180_000 }, async () => {
  const [http, smtp, app] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(resolve(ROOT, 'node_modules/.bin/playwright'), ['test', '-c', 'examples/signup-playwright/playwright.config.ts'], {
    cwd: ROOT,
    env: { ...process.env, EPHEMAIL_HTTP_PORT: String(http), EPHEMAIL_SMTP_PORT: String(smtp), APP_PORT: String(app), CI: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  assert.equal(code, 0, out);
  assert.match(out, /1 passed/);
});
