// The README's examples run as written (README.md "Try it", "Get the code in one call", "From your
// tests and CI": the JS client, the Python client in a venv made as the README says, the shell step),
// against one instance with its default limits (3 keys per IP a day), twice in a row as a user re-running
// the tour would: the first round mints one key, the second mints none (the clients remember it).
// Only the service's address, the example app (examples/signup-playwright/app.mjs, which sends its
// code by SMTP) in place of "your app sends …" lines, and a last line printing the result are
// substituted; the Python client is installed into the venv by the README's offline line.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { freePort, ROOT } from '../helpers/serve.ts';
import { startService, type TestService } from '../helpers/service.ts';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const ADDRESS = 'k3v9x0q2mz@ephemail.test';

/** The `nth` fenced block of `lang` under the heading `heading` (up to the next heading of its level or above). */
function block(heading: string, lang: string, nth = 0): string {
  const lines = README.split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `README.md has the heading "${heading}"`);
  const level = heading.split(' ')[0]!.length;
  const blocks: string[] = [];
  let fence: string[] | null = null;
  let fenceLang = '';
  for (const line of lines.slice(start + 1)) {
    if (fence) {
      if (/^\s*```\s*$/.test(line)) {
        if (fenceLang === lang) blocks.push(`${fence.join('\n')}\n`);
        fence = null;
      } else fence.push(line);
      continue;
    }
    const open = /^\s*```(\w*)\s*$/.exec(line);
    if (open) {
      fence = [];
      fenceLang = open[1]!;
      continue;
    }
    const h = /^(#+) /.exec(line);
    if (h && h[1]!.length <= level) break;
  }
  assert.ok(blocks[nth] !== undefined, `README.md "${heading}" has a ${lang} block`);
  return blocks[nth]!;
}

/** `text` with `from` replaced by `to`, which must be there. */
function swap(text: string, from: string, to: string): string {
  assert.ok(text.includes(from), `the README block has "${from}":\n${text}`);
  return text.split(from).join(to);
}

let svc: TestService;
let app: { url: string; child: ChildProcess };
let home: string;
let env: NodeJS.ProcessEnv;
let python: string;
/** A copy of clients/python in a checkout-like folder: building it leaves build/ and *.egg-info beside it. */
let checkout: string;

before(async () => {
  svc = await startService({}, { mounts: [] }); // default limits
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, 'examples/signup-playwright/app.mjs')], {
    cwd: ROOT,
    env: { ...process.env, APP_PORT: String(port), SMTP_PORT: String(svc.smtpPort) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((ok, fail) => {
    child.once('exit', (code) => fail(new Error(`the example app exited (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('example app on')) ok();
    });
  });
  app = { url: `http://127.0.0.1:${port}`, child };
  // a user's shell: their own HOME (the key cache under ~/.cache), this Node first on PATH
  home = mkdtempSync(join(tmpdir(), 'ephemail-readme-'));
  env = {
    ...process.env,
    HOME: home,
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
    EPHEMAIL_URL: svc.http,
    APP_URL: app.url,
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
      // pip never asks an index (no traffic leaves loopback)
    PIP_NO_INDEX: '1',
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
  };
  for (const name of ['EPHEMAIL_API_KEY', 'EPHEMAIL_KEY_CACHE', 'XDG_CACHE_HOME', 'NODE_TEST_CONTEXT']) delete env[name];
  python = process.env.EPHEMAIL_PYTHON || '/usr/bin/python3';
  checkout = join(home, 'ephemail');
  cpSync(join(ROOT, 'clients', 'python'), join(checkout, 'clients', 'python'), { recursive: true, filter: (p) => !/(__pycache__|\.egg-info|[\\/]build|[\\/]dist)$/.test(p) });
});
after(async () => {
  app?.child.kill();
  await svc?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

function run(cmd: string, args: string[], cwd = ROOT): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}
async function bash(script: string, cwd = ROOT): Promise<string> {
  const r = await run('bash', ['-eo', 'pipefail', '-c', script], cwd);
  assert.equal(r.code, 0, `bash exited ${r.code}:\n${script}\n--- stderr:\n${r.stderr}`);
  return r.stdout;
}
const local = (text: string) => text.split('http://localhost:8025').join(svc.http).split('localhost:8025').join(svc.http.replace('http://', ''));

/** Keys minted so far (POST /api/v1/keys answered 201). */
async function minted(): Promise<number> {
  const text = await (await fetch(`${svc.http}/metrics`)).text();
  return text.split('\n')
    .filter((l) => l.startsWith('ephemail_http_requests_total{') && l.includes('method="POST"') && l.includes('route="/api/v1/keys"') && l.includes('status="201"'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

async function verified(address: string, code: string): Promise<boolean> {
  const res = await fetch(`${app.url}/verify`, { method: 'POST', body: new URLSearchParams({ email: address, code }) });
  return (await res.text()).includes('<h1 id="result">verified</h1>');
}

/** One round of the README, in order; resolves with what each example printed. */
async function tour(round: number): Promise<void> {
  const venv = join(home, 'project');
  // "Try it": an address, a mail by swaks, the list
  const tryIt = swap(local(block('## Try it', 'sh')), '127.0.0.1:1025', `127.0.0.1:${svc.smtpPort}`);
  // curl prints no line end: the new inbox's JSON runs into swaks' transcript ("=== Trying …")
  const out = await bash(tryIt);
  const tried = out.trim().split('\n');
  assert.match(JSON.parse(out.slice(0, out.indexOf('=== '))).data.address, /^[a-z0-9]{10}@ephemail\.test$/, `round ${round}: POST /inboxes`);
  // the address is the README's own: each round adds swaks' mail (and, before it, the app's code mail)
  const listed = JSON.parse(tried.at(-1)!).data as { subject: string }[];
  assert.equal(listed.length, 2 * round - 1, `round ${round}: the list has swaks' mail and the earlier rounds'`);
  assert.match(listed[0]!.subject, /^test /, `round ${round}: swaks' mail is the newest`);

  // "Get the code in one call": the key (remembered), a held latest?wait, jq prints the code
  const getCode = swap(local(block('### Get the code in one call', 'sh')), `# … your app sends the verification email to ${ADDRESS} …`, `curl -fsS -o /dev/null -X POST "$APP_URL/signup" --data-urlencode "email=${ADDRESS}"`);
  const code = (await bash(getCode)).trim();
  assert.match(code, /^\d{6}$/, `round ${round}: the code of the app's email`);
  assert.ok(await verified(ADDRESS, code), `round ${round}: the app takes the code`);

  // "From a shell step": the CI step, then the code it read
  const step = (await bash(`${block('### From a shell step: `npx @ephemail/client`', 'sh')}\necho "$ADDR $CODE"`)).trim().split(' ');
  assert.ok(await verified(step[0]!, step[1]!), `round ${round}: the shell step's code verifies`);

  // "From a test suite": the JS client (top-level await: an ES module in this checkout)
  const js = swap(local(block('### From a test suite: `@ephemail/client`', 'ts')), '// … sign up with inbox.address …', "await fetch(process.env.APP_URL + '/signup', { method: 'POST', body: new URLSearchParams({ email: inbox.address }) });");
  const jsFile = join(ROOT, 'test', 'examples', `.readme-${process.pid}-${round}.mjs`);
  writeFileSync(jsFile, `${js}\nconsole.log(inbox.address, code);\n`);
  let jsOut: string;
  try {
    const r = await run(process.execPath, [jsFile]);
    assert.equal(r.code, 0, r.stderr);
    jsOut = r.stdout;
  } finally {
    rmSync(jsFile, { force: true });
  }
  const [jsAddress, jsCode] = jsOut.trim().split(' ');
  assert.ok(await verified(jsAddress!, jsCode!), `round ${round}: the JS client's code verifies`);

  // "From Python": the venv as the README makes it (its offline line: pip in a venv builds the
  // package with setuptools from PyPI, which no test reaches), then the example
  const [makeVenv, , offline] = swap(block('### From Python: `ephemail` (pytest)', 'sh'), '<path-to-ephemail>', checkout).trim().split('\n');
  const venvLine = makeVenv!.split(' && ')[0]!;
  assert.equal(venvLine, 'python3 -m venv .venv');
  await bash(`mkdir -p ${venv} && cd ${venv} && rm -rf dist && ${python} -m venv .venv && ${offline!.replace(/^python3 /, `${python} `)}`);
  const py = swap(local(block('### From Python: `ephemail` (pytest)', 'python')), '# … sign up with inbox.address …', [
    'import os, urllib.parse, urllib.request',
    'urllib.request.urlopen(os.environ["APP_URL"] + "/signup", urllib.parse.urlencode({"email": inbox.address}).encode()).read()',
  ].join('\n'));
  writeFileSync(join(venv, 'example.py'), `${py}\nprint(inbox.address, code)\n`);
  const pyRun = await run(join(venv, '.venv', 'bin', 'python'), ['example.py'], venv);
  assert.equal(pyRun.code, 0, pyRun.stderr);
  const [pyAddress, pyCode] = pyRun.stdout.trim().split(' ');
  assert.ok(await verified(pyAddress!, pyCode!), `round ${round}: the Python client's code verifies`);
}

test('the README examples run as written, twice on one instance with default limits; the second round mints no key', { timeout: 300_000 }, async () => {
  assert.equal(await minted(), 0);
  await tour(1);
  assert.equal(await minted(), 1, 'the first round mints one key (the first `npx @ephemail/client key`), every client then reuses it');
  const cache = join(home, '.cache', 'ephemail', 'keys.json');
  assert.ok(existsSync(cache));
  assert.equal(statSync(cache).mode & 0o777, 0o600);
  const key = JSON.parse(readFileSync(cache, 'utf8')).keys[svc.http].api_key;
  await tour(2);
  assert.equal(await minted(), 1, 'the second round mints no key');
  assert.equal(JSON.parse(readFileSync(cache, 'utf8')).keys[svc.http].api_key, key);
});
