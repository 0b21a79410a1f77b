// The Python client's own suite (clients/python/tests) in `npm test`: Debian's /usr/bin/python3 runs
// pytest, whose harness starts its own ephemail (`node bin/ephemail.js serve` with this Node, on free
// ports, a temporary SQLite file). It needs the Debian packages python3-pytest (the runner),
// python3-setuptools, python3-pip and python3-wheel (the offline wheel build it checks). Without them
// the test is skipped with the reason, said loudly; under CI=true that is a failure.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { ROOT } from '../helpers/serve.ts';

const PYTHON = process.env.EPHEMAIL_PYTHON || '/usr/bin/python3';
/** module → the Debian package that brings it */
const NEEDS: Record<string, string> = { pytest: 'python3-pytest', setuptools: 'python3-setuptools', pip: 'python3-pip', wheel: 'python3-wheel' };
const ci = process.env.CI === 'true' || process.env.CI === '1';

function lacking(): string[] {
  const probe = spawnSync(PYTHON, ['-c', 'import importlib.util, sys; print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))', ...Object.keys(NEEDS)], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return Object.keys(NEEDS);
  return probe.stdout.split(/\s+/).filter(Boolean);
}

const missing = lacking();
const reason = missing.length
  ? `${PYTHON} lacks ${missing.join(', ')}: apt-get install -y ${missing.map((m) => NEEDS[m]).join(' ')} (Debian), or EPHEMAIL_PYTHON=<a python with them>`
  : '';
if (missing.length) console.error(`\n# PYTHON CLIENT TESTS ${ci ? 'CANNOT RUN' : 'SKIPPED'}: ${reason}\n`);

test('the Python client (clients/python): its pytest suite against a live instance passes, nothing skipped', { skip: missing.length && !ci ? reason : false, timeout: 600_000 }, async (t) => {
  assert.deepEqual(missing, [], `CI=true: ${reason}`);
  const env: NodeJS.ProcessEnv = { ...process.env, EPHEMAIL_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1' };
  // the suite starts its own service: none named from outside
  for (const name of ['EPHEMAIL_URL', 'EPHEMAIL_SMTP', 'EPHEMAIL_API_KEY', 'PYTHONPATH']) delete env[name];
  const child = spawn(PYTHON, ['-m', 'pytest', 'clients/python/tests', '-p', 'no:cacheprovider', '-rfEs', '-v'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((done) => child.on('close', (c) => done(c)));
  const summary = out.trim().split('\n').at(-1) ?? '';
  t.diagnostic(`pytest: ${summary}`);
  assert.equal(code, 0, `pytest exited ${code}:\n${out.slice(-12_000)}`);
  assert.match(summary, /\b\d+ passed\b/, out.slice(-4000));
  assert.doesNotMatch(summary, /skipped|xfail|deselected/, `every Python test must run:\n${out.slice(-4000)}`);
});
