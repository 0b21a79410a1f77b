#!/usr/bin/env node
// `npm test`: sets up what the suite needs, then runs every test/**/*.test.ts with node's test runner
// through tsx (scripts/test-files.mjs: the slowest files first, EPHEMAIL_TEST_CONCURRENCY at a time,
// 4 by default), type-checking the server and the client package (`tsc --noEmit`, at a lower CPU
// priority) meanwhile. Pass paths to run a subset (no type-check then): `npm test -- test/http`.
//
// Set-up, as .ci/run does on a fresh machine: the Debian packages of scripts/system-packages.txt that
// the tests to run need (on Debian as root, the missing ones are installed here with apt-get; elsewhere,
// or with EPHEMAIL_TEST_INSTALL=0, they are named with the command that installs them and the run
// stops), then a Redis: the one at EPHEMAIL_TEST_REDIS_URL (default redis://127.0.0.1:6379) if it
// answers, else a private redis-server on a free loopback port, stopped when the tests end.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { setPriority } from 'node:os';
import { delimiter, join, relative, resolve } from 'node:path';

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
// The clients' key cache (packages/client/src/key-cache.js, the Python client's key_cache.py) is
// off: no test reads or writes the user's remembered keys; the tests of the cache name their own file.
process.env.EPHEMAIL_KEY_CACHE = 'off';
// IMAP and POP3 (docs/imap.md) on free ports in every service a test starts: never the fixed 1143/1110
process.env.EPHEMAIL_IMAP_PORT ||= '0';
process.env.EPHEMAIL_POP3_PORT ||= '0';
// Node's on-disk compile cache for every process the run starts (each test file's, the services it
// spawns, the clients): the modules they share (fastify, the parsers, dist/) are compiled once.
process.env.NODE_COMPILE_CACHE ||= join(root, 'node_modules', '.cache', 'node-compile');

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

// The Debian packages the tests to run need (scripts/system-packages.txt, shared with .ci/run).
const python = process.env.EPHEMAIL_PYTHON || '/usr/bin/python3';
/** What a probe looks for: its alternatives, or only the variable's value when a `$VAR` of it is set. */
function sought(probe) {
  const all = probe.slice(probe.indexOf(':') + 1).split('|');
  const set = all.find((a) => a.startsWith('$') && process.env[a.slice(1)]);
  return set ? [process.env[set.slice(1)]] : all.filter((a) => !a.startsWith('$'));
}
function present(probe) {
  const kind = probe.slice(0, probe.indexOf(':'));
  return sought(probe).some((a) => {
    if (kind === 'file') return existsSync(a);
    if (kind === 'cmd') return [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin'].some((d) => d && existsSync(join(d, a)));
    if (kind === 'py') return existsSync(python) && spawnSync(python, ['-c', `import ${a}`], { stdio: 'ignore' }).status === 0;
    throw new Error(`scripts/system-packages.txt: unknown probe ${probe}`);
  });
}
const packages = readFileSync(join(root, 'scripts', 'system-packages.txt'), 'utf8').split('\n')
  .map((l) => l.replace(/#.*/, '').trim()).filter(Boolean)
  .map((l) => { const [name, probe, ...paths] = l.split(/\s+/); return { name, probe, paths }; });
const needed = packages.filter((p) => p.paths.includes('*') || files.some((f) => p.paths.some((n) => {
  const rel = relative(root, f).split('\\').join('/');
  return rel === n || rel.startsWith(`${n}/`);
})));
let lacking = needed.filter((p) => !present(p.probe));
const debian = existsSync('/etc/debian_version') && present('cmd:apt-get');
const root0 = process.getuid?.() === 0;
if (lacking.length && debian && root0 && process.env.EPHEMAIL_TEST_INSTALL !== '0') {
  const names = lacking.map((p) => p.name);
  console.log(`# npm test: installing the Debian packages the tests need: ${names.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
  spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...names], { stdio: 'inherit', env });
  lacking = lacking.filter((p) => !present(p.probe));
}
if (lacking.length) {
  const names = lacking.map((p) => p.name).join(' ');
  const how = debian
    ? root0
      ? `apt-get install -y --no-install-recommends ${names}` + (process.env.EPHEMAIL_TEST_INSTALL === '0' ? '' : '   (it ran above and did not provide them: see its output, and any EPHEMAIL_CHROMIUM, EPHEMAIL_SPAMD_BIN or EPHEMAIL_PYTHON set)')
      : `sudo apt-get install -y --no-install-recommends ${names}   (or run npm test as root: it installs them itself)`
    : `install them from your system's packages (their Debian names: ${names}); EPHEMAIL_CHROMIUM, EPHEMAIL_SPAMD_BIN and EPHEMAIL_PYTHON name a Chromium, a spamd and a Python with pytest elsewhere`;
  loud([
    'npm test: the tests to run need what this machine lacks:',
    ...lacking.map((p) => `  ${p.name.padEnd(19)} (no ${sought(p.probe).join(' or ')}${p.probe.startsWith('py:') ? ` in ${python}` : ''}; for ${p.paths.join(', ')})`),
    `Install: ${how}`,
  ]);
  process.exit(1);
}

// The bundle every spawned service runs (bin/ephemail.js runs dist/ and never builds it): built here
// unless dist/ is already the build of the current sources, so no test runs stale code. A failed
// build (a syntax error in src/) is said loudly, before the tests and again at the end, and fails the
// run; the tests still run (those loading the sources through tsx say more about the error).
let buildFailed = null;
try {
  const { OUT_DIR, compiledEntry, isCurrent } = await import('./build.mjs');
  if (!isCurrent()) {
    const t0 = Date.now();
    await compiledEntry();
    console.log(`# npm test: built ${relative(root, OUT_DIR)}/ from the current sources (scripts/build.mjs) in ${Date.now() - t0} ms`);
  }
  // The worker threads of services a test starts in its own process (from the sources) run the
  // built worker files, as npm start does: ~3x cheaper to start than the sources through tsx
  // (src/worker-entry.ts). Only when the build is current; a run with a failed build uses the sources.
  process.env.EPHEMAIL_TEST_BUILT_WORKERS = OUT_DIR;
} catch (err) {
  buildFailed = [`npm test: the build of src/ (scripts/build.mjs) FAILED: ${err?.message ?? err}`, 'Services the tests start run the last build of dist/ (warning that it is stale) or none.'];
  loud(buildFailed);
}

// A Redis for the Redis store, multi-node and fault tests: the one that answers, else a private one.
const redisUrl = process.env.EPHEMAIL_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
/** The private redis-server this run started, stopped when the tests end. */
let privateRedis = null;
if (await redisAlive(redisUrl)) {
  process.env.EPHEMAIL_TEST_REDIS_URL = redisUrl;
} else {
  const port = await new Promise((done, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => done(p)); });
  });
  privateRedis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const stop = () => { if (privateRedis.exitCode === null) privateRedis.kill('SIGKILL'); };
  process.on('exit', stop);
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stop(); process.exit(1); });
  const url = `redis://127.0.0.1:${port}`;
  const t0 = Date.now();
  while (!(await redisAlive(url))) {
    if (privateRedis.exitCode !== null || Date.now() - t0 > 10_000) {
      loud([`NO REDIS at ${redisUrl}, and a private redis-server on 127.0.0.1:${port} did not start.`]);
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  console.log(`# npm test: no Redis answers at ${redisUrl}; started a private one at ${url} (pid ${privateRedis.pid}), stopped when the tests end`);
  process.env.EPHEMAIL_TEST_REDIS_URL = url;
}

for (const m of missing) loud(m);
if (missing.length && ci) {
  console.error('CI=true: a missing corpus is a failure.');
  process.exit(1);
}
// Run after the others, alone: files whose assertions are the service's own latency under a load
// they make (the search bounds of docs/security.md), which another file beside them would skew.
// (The flood's RSS bound is its own spawned process's, the packed install waits mostly on npm, and
// the failover's 15 s are Redis Cluster's timers: they run with the others.)
const SOLO = [
  /[\\/]test[\\/]security[\\/]search\.test\.ts$/,
];
const solo = files.filter((f) => SOLO.some((re) => re.test(f)));
// The slowest files first (as measured in a whole run, slowest first), the others after them by name:
// files run CONCURRENCY at a time, and a long file started near the end would run on alone.
const SLOW_FIRST = [
  'e2e/soak', 'e2e/big-headers', 'bench/bench-smoke', 'redis/failover', 'push/webhooks', 'http/events-order', 'client/python', 'http/openapi-wire',
  'client/cli', 'web/layout', 'web/pages', 'examples/readme', 'http/wait', 'security/load', 'imap/limits',
  'web/hostile', 'bench/bench-redis-smoke', 'e2e/lifecycle', 'push/fanout', 'mcp/conformance', 'security/mime',
  'faults/faults', 'e2e/corpus', 'e2e/verification', 'redis/push-nodes', 'services/views', 'cli/pack',
  'redis/domains-nodes', 'security/smtp', 'redis/fault', 'cli/domains', 'push/atomic-ingest', 'smtp/receiver',
].map((name) => join(root, 'test', `${name}.test.ts`));
const rank = (f) => (SLOW_FIRST.includes(f) ? SLOW_FIRST.indexOf(f) : SLOW_FIRST.length);
const rest = files.filter((f) => !solo.includes(f)).sort((a, b) => rank(a) - rank(b));
const CONCURRENCY = Number(process.env.EPHEMAIL_TEST_CONCURRENCY || 4);
if (!(CONCURRENCY >= 1)) {
  console.error(`EPHEMAIL_TEST_CONCURRENCY=${process.env.EPHEMAIL_TEST_CONCURRENCY}: not a number of files at a time`);
  process.exit(1);
}

// Type-check (the whole suite only; a subset run is for quick iteration) while the tests run, at a
// lower CPU priority (it takes what the tests leave): server, tests, benches and scripts through the
// root tsconfig, and the client package's declarations. Its output is printed after the tests.
let typecheck = 0;
const typechecked = args.length ? Promise.resolve('') : (async () => {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  let out = '';
  for (const project of ['tsconfig.json', 'packages/client/tsconfig.json']) {
    const child = spawn(process.execPath, [tsc, '--noEmit', '-p', project], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      setPriority(child.pid, 10);
    } catch {
      // not allowed here: it runs at the tests' priority
    }
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    const status = await new Promise((r) => child.on('close', (c, signal) => r(c ?? (signal ? 1 : 0))));
    out += `# tsc --noEmit -p ${project}${status === 0 ? ': no errors' : ' FAILED'}\n${text}`;
    if (status !== 0) typecheck = 1;
  }
  return out;
})();

const totals = new Map();
function run(list, concurrency) {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'scripts', 'test-files.mjs'), String(concurrency), ...list], {
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

let code = rest.length ? await run(rest, CONCURRENCY) : 0;
// the type-check's output (done by now, or awaited: the files run alone must run alone)
const typecheckOutput = await typechecked;
if (typecheckOutput) process.stdout.write(`\n${typecheckOutput}`);
code = code || typecheck || (buildFailed ? 1 : 0);
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
if (typecheck) loud(['tsc --noEmit FAILED (its errors are above, after the files run together).']);
if (buildFailed) loud(buildFailed);
for (const m of missing) loud(m);
if (privateRedis && privateRedis.exitCode === null) {
  // stopped before this process ends (SIGTERM; SIGKILL after 5 s)
  const exited = new Promise((r) => privateRedis.once('exit', r));
  privateRedis.kill('SIGTERM');
  const timer = setTimeout(() => privateRedis.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
process.exit(code);
