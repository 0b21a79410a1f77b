// Starting the real process (`node bin/ephemail.js serve`, what `npm start` runs): a taken port is
// one clear line with a hint and exit code 1, never a stack trace. It runs the bundle in dist/ and
// never builds it (scripts/build.mjs, docs/operations.md "Build"): no bundle is one line naming
// `npm run build` and exit 1; a bundle of other sources than src/ holds is one warning line naming
// `npm run build`, and it runs all the same.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, spawnServe } from '../helpers/serve.ts';

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

/** A copy of the checkout's sources, bin and build script in a temporary directory (node_modules linked), built there. */
function checkoutCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-build-'));
  for (const d of ['bin', 'src']) cpSync(join(ROOT, d), join(dir, d), { recursive: true });
  mkdirSync(join(dir, 'scripts'));
  for (const f of ['package.json', 'tsconfig.json', 'scripts/build.mjs']) copyFileSync(join(ROOT, f), join(dir, f));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const built = spawnSync(process.execPath, [join(dir, 'scripts/build.mjs')], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  assert.equal(built.status, 0, `the build in the copy: ${built.stderr}`);
  return dir;
}

/** dist/'s file names and the manifest: what a start must leave as it found it. */
const distState = (dir: string) => ({ files: readdirSync(join(dir, 'dist')).sort(), manifest: readFileSync(join(dir, 'dist/manifest.json'), 'utf8') });

async function serveOnce(dir: string): Promise<string> {
  const svc = await spawnServe({ EPHEMAIL_STORE: `sqlite:${join(dir, 'x.db')}`, EPHEMAIL_LOG_LEVEL: 'info' }, { cwd: dir, script: join(dir, 'bin/ephemail.js') });
  try {
    assert.equal((await fetch(`${svc.http}/api/v1/health`)).status, 200);
  } finally {
    const exited = new Promise((r) => svc.child.once('exit', r));
    svc.child.kill('SIGTERM');
    await exited;
  }
  return svc.output();
}

test('a current bundle runs without a word; sources edited since: one warning line naming `npm run build`, and it runs, building nothing', { timeout: 120_000 }, async () => {
  const dir = checkoutCopy();
  try {
    const before = distState(dir);
    assert.doesNotMatch(await serveOnce(dir), /npm run build/, 'the bundle of the current sources: no warning');
    // an edit after the build
    writeFileSync(join(dir, 'src/main.ts'), `${readFileSync(join(dir, 'src/main.ts'), 'utf8')}\n// edited after the build\n`);
    const output = await serveOnce(dir);
    const warnings = output.split('\n').filter((l) => /npm run build/.test(l));
    assert.equal(warnings.length, 1, output);
    assert.match(warnings[0]!, /^ephemail: warning: dist\/ was built from other sources than src\/ holds now; running it anyway \(`npm run build` rebuilds it\)$/);
    assert.deepEqual(distState(dir), before, 'start built nothing');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('no bundle: one line naming `npm run build`, exit 1, nothing built', { timeout: 120_000 }, () => {
  const dir = checkoutCopy();
  try {
    rmSync(join(dir, 'dist'), { recursive: true, force: true });
    const r = spawnSync(process.execPath, [join(dir, 'bin/ephemail.js'), 'serve'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_TSX: '', EPHEMAIL_DNS_SERVERS: '127.0.0.1:1' },
    });
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'ephemail: no build of the sources in dist/: run `npm run build` (in a checkout, `npm ci` builds it too)\n');
    assert.throws(() => readdirSync(join(dir, 'dist')), /ENOENT/, 'start built nothing');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
