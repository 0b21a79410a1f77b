// `npm test` sets up what it needs (scripts/test.mjs): a Debian package the tests to run need and the
// machine lacks is named with the command that installs it, and the run stops before any test; with
// no Redis answering, a private redis-server on a free loopback port serves the run and is stopped
// when the tests end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { freePort } from '../helpers/serve.ts';

const root = resolve(import.meta.dirname, '../..');
const script = resolve(root, 'scripts/test.mjs');

function answers(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      s.destroy();
      done(d.toString().startsWith('+PONG'));
    });
    s.on('error', () => done(false));
  });
}

test('a package the tests need is missing: named with its apt-get line, exit 1, no test run', { timeout: 60_000 }, () => {
  const r = spawnSync(process.execPath, [script, 'test/web/pages.test.ts'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 50_000,
    env: { ...process.env, EPHEMAIL_CHROMIUM: '/nonexistent/chromium', EPHEMAIL_TEST_INSTALL: '0' },
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /the tests to run need what this machine lacks:/);
  assert.match(r.stderr, /chromium\s+\(no \/nonexistent\/chromium; for test\/web/);
  assert.match(r.stderr, /Install: (sudo )?apt-get install -y --no-install-recommends chromium\b/);
  assert.doesNotMatch(r.stderr, /swaks|python3-pytest/, 'only what these tests need and lack is named');
  assert.doesNotMatch(r.stdout, /ℹ tests/, 'no test ran');
});

test('no Redis answers: a private redis-server on a free loopback port serves the run, stopped at its end', { timeout: 120_000 }, async () => {
  const dead = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-setup-'));
  try {
    const probe = join(dir, 'probe.test.ts');
    const out = join(dir, 'url.txt');
    writeFileSync(
      probe,
      `import { writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { test } from 'node:test';
test('the run has a Redis', async () => {
  const url = new URL(process.env.EPHEMAIL_TEST_REDIS_URL ?? '');
  const pong = await new Promise<string>((done, fail) => {
    const s = createConnection({ host: url.hostname, port: Number(url.port) });
    s.on('connect', () => s.write('PING\\r\\n'));
    s.on('data', (d) => { s.destroy(); done(d.toString()); });
    s.on('error', fail);
  });
  if (!pong.startsWith('+PONG')) throw new Error(pong);
  writeFileSync(process.env.PROBE_OUT ?? '', url.href);
});
`,
    );
    const r = spawnSync(process.execPath, [script, probe], {
      cwd: root,
      encoding: 'utf8',
      timeout: 100_000,
      // NODE_TEST_CONTEXT unset: the inner `node --test` is a run of its own, not a file of this one
      env: { ...process.env, NODE_TEST_CONTEXT: undefined, EPHEMAIL_TEST_REDIS_URL: `redis://127.0.0.1:${dead}`, PROBE_OUT: out },
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const said = /no Redis answers at redis:\/\/127\.0\.0\.1:(\d+); started a private one at redis:\/\/127\.0\.0\.1:(\d+) \(pid (\d+)\)/.exec(r.stdout);
    assert.ok(said, r.stdout);
    assert.equal(Number(said[1]), dead);
    const port = Number(said[2]);
    assert.notEqual(port, dead);
    assert.equal(readFileSync(out, 'utf8'), `redis://127.0.0.1:${port}`, 'the tests were given the private Redis');
    assert.equal(await answers(port), false, 'the private Redis is stopped when the run ends');
    assert.throws(() => process.kill(Number(said[3]), 0), /ESRCH/, 'its process is gone');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
