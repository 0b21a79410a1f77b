#!/usr/bin/env node
// `npm test`: checks the services and files the suite needs (Redis, the corpus and, for the
// Python client, Debian's pytest: loudly), type-checks the server and the client package
// (`tsc --noEmit`), then runs every test/**/*.test.ts with node's test runner through tsx. Pass
// paths to run a subset (no type-check then): `npm test -- test/http`.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const ci = process.env.CI === 'true' || process.env.CI === '1';

function redisAlive(url) {
  const u = new URL(url);
  return new Promise((done) => {
    const s = createConnection({ host: u.hostname, port: Number(u.port || 6379) });
    const t = setTimeout(() => { s.destroy(); done(false); }, 2000);
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => { clearTimeout(t); s.destroy(); done(d.toString().startsWith('+PONG')); });
    s.on('error', () => { clearTimeout(t); done(false); });
  });
}

const banner = '#'.repeat(78);
/** What could not run, said before the tests and again as the last lines. */
const missing = [];
function loud(lines) {
  console.error(`\n${banner}\n${lines.map((l) => `# ${l}`).join('\n')}\n${banner}\n`);
}

// The authentication checks of any service a test starts never query the outside (a loopback port
// nothing answers on: temperror at once); tests of the checks run their own DNS server.
process.env.EPHEMAIL_DNS_SERVERS ||= '127.0.0.1:1';

const redisUrl = process.env.EPHEMAIL_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
if (await redisAlive(redisUrl)) {
  process.env.EPHEMAIL_TEST_REDIS_URL = redisUrl;
} else {
  missing.push([
    `NO REDIS at ${redisUrl}: the Redis store, multi-node and fault tests are SKIPPED.`,
    'Start it: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ""',
  ]);
  process.env.EPHEMAIL_TEST_REDIS_URL = '';
}

// The real-world corpus is vendored under test/fixtures/corpus; EPHEMAIL_CORPUS may name another copy
// (test/helpers/corpus.ts).
const corpus = resolve(root, process.env.EPHEMAIL_CORPUS || 'test/fixtures/corpus');
process.env.EPHEMAIL_CORPUS = corpus;
if (!existsSync(join(corpus, 'MANIFEST.tsv'))) {
  missing.push([
    `NO CORPUS at ${corpus}: the 222-message corpus tests (test/e2e/corpus.test.ts,`,
    'test/smtp/summary.test.ts) are SKIPPED. Set EPHEMAIL_CORPUS to its directory to run them.',
  ]);
}
function collect(path, out) {
  const st = statSync(path);
  if (st.isDirectory()) {
    for (const name of readdirSync(path).sort()) if (name !== 'node_modules' && !name.startsWith('.')) collect(join(path, name), out);
  } else if (/\.test\.ts$/.test(path)) out.push(path);
  return out;
}

const args = process.argv.slice(2);
const targets = args.length ? args : ['test'];
const files = targets.flatMap((t) => collect(resolve(root, t), []));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

// The Python client's suite (test/client/python.test.ts) runs Debian's pytest: checked when it is to run.
if (files.some((f) => /[\\/]test[\\/]client[\\/]python\.test\.ts$/.test(f))) {
  const python = process.env.EPHEMAIL_PYTHON || '/usr/bin/python3';
  const needs = { pytest: 'python3-pytest', setuptools: 'python3-setuptools', pip: 'python3-pip', wheel: 'python3-wheel' };
  const probe = spawnSync(python, ['-c', 'import importlib.util, sys; print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))', ...Object.keys(needs)], { encoding: 'utf8' });
  const lacking = probe.status === 0 ? probe.stdout.split(/\s+/).filter(Boolean) : Object.keys(needs);
  if (lacking.length) {
    missing.push([
      `NO PYTEST FOR THE PYTHON CLIENT: ${python} lacks ${lacking.join(', ')}; its tests (test/client/python.test.ts) are SKIPPED.`,
      `Install them: apt-get install -y ${lacking.map((m) => needs[m]).join(' ')}`,
    ]);
  }
}
// The spam score's tests (test/http/spam.test.ts) run a real SpamAssassin spamd: checked when they are to run.
if (files.some((f) => /[\\/]test[\\/]http[\\/]spam\.test\.ts$/.test(f))) {
  const spamd = process.env.EPHEMAIL_SPAMD_BIN || ['/usr/sbin/spamd', '/usr/bin/spamd'].find((p) => existsSync(p));
  if (!spamd) {
    missing.push([
      'NO SPAMD: the real-spamd tests of test/http/spam.test.ts (GTUBE is spam, a plain message is not) are SKIPPED.',
      'Install it: apt-get install -y spamassassin (Debian; it brings spamd), or EPHEMAIL_SPAMD_BIN=<path>',
    ]);
  }
}
for (const m of missing) loud(m);
if (missing.length && ci) {
  console.error('CI=true: a missing Redis, corpus, Python test runner or spamd is a failure.');
  process.exit(1);
}
// Run after the others, alone: files that load the whole machine (the packed install), and files
// whose assertions are the service's own latency under a load they make (the search bounds of
// docs/security.md, the failover's 15 s), which another file beside them would skew.
const SOLO = [
  /[\\/]test[\\/]cli[\\/]pack\.test\.ts$/,
  /[\\/]test[\\/]security[\\/]search\.test\.ts$/,
  /[\\/]test[\\/]redis[\\/]failover\.test\.ts$/,
];
const solo = files.filter((f) => SOLO.some((re) => re.test(f)));
const rest = files.filter((f) => !solo.includes(f));

// Type-check first (the whole suite only; a subset run is for quick iteration): server, tests,
// benches and scripts through the root tsconfig, and the client package's declarations.
let typecheck = 0;
if (!args.length) {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  for (const project of ['tsconfig.json', 'packages/client/tsconfig.json']) {
    console.log(`# tsc --noEmit -p ${project}`);
    const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', project], { cwd: root, stdio: 'inherit' });
    if (r.status !== 0) {
      console.error(`# tsc --noEmit -p ${project} FAILED`);
      typecheck = 1;
    }
  }
}

const totals = new Map();
function run(list, concurrency = 2) {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...list], {
      stdio: ['inherit', 'pipe', 'inherit'],
      cwd: root,
      env: { ...process.env, EPHEMAIL_LOG_LEVEL: process.env.EPHEMAIL_LOG_LEVEL ?? 'silent' },
    });
    let partial = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      partial += chunk.toString();
      const lines = partial.split('\n');
      partial = lines.pop();
      for (const line of lines) {
        const m = /^\u2139 (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)\s*$/.exec(line);
        if (m) totals.set(m[1], (totals.get(m[1]) ?? 0) + Number(m[2]));
      }
    });
    child.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

let code = rest.length ? await run(rest) : 0;
code = code || typecheck;
if (solo.length) {
  if (rest.length) console.log(`\n# then, alone: ${solo.map((f) => f.slice(root.length + 1)).join(', ')}\n`);
  const soloCode = await run(solo, 1);
  code = code || soloCode;
  if (rest.length) {
    // one summary of both runs, as the last lines
    console.log('\n# all test files together');
    for (const [k, v] of totals) console.log(`\u2139 ${k} ${k === 'duration_ms' ? v.toFixed(3) : v}`);
  }
}
if (typecheck) loud(['tsc --noEmit FAILED (see its errors above the tests).']);
for (const m of missing) loud(m);
process.exit(code);
