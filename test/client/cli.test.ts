// `ephemail-client` (`npx @ephemail/client …`), the client package's shell command, against a real
// service: the README's CI recipe run as written through bash (in this repository, and from the packed
// package installed on its own, without the server), every command and option, the exit statuses, and
// every response field the command reads checked against the live OpenAPI document.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { HELP, LINK_KINDS, READS } from '@ephemail/client/cli';
import { ACTION_LINK_KINDS } from '@ephemail/client';
import { ACTION_KINDS } from '../../src/domain/extract/links.ts';
import { freePort, ROOT } from '../helpers/serve.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { metric } from '../helpers/metrics.ts';
import { until } from '../helpers/time.ts';

const CLIENT = join(ROOT, 'packages/client');
const BIN = join(CLIENT, 'bin/ephemail-client.js');
const README = join(CLIENT, 'README.md');

let svc: TestService;
let app: { url: string; child: ChildProcess };

/** The example sign-up app (examples/signup-playwright/app.mjs): sends its code by SMTP to the service. */
async function startApp(smtpPort: number): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, 'examples/signup-playwright/app.mjs')], {
    cwd: ROOT,
    env: { ...process.env, APP_PORT: String(port), SMTP_PORT: String(smtpPort) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((ok, fail) => {
    child.once('exit', (code) => fail(new Error(`the example app exited (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('example app on')) ok();
    });
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

before(async () => {
  // every `wait` without EPHEMAIL_API_KEY mints a key: more than the default 3 per IP a day here
  svc = await startService({ EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '1000' }, { mounts: [] });
  app = await startApp(svc.smtpPort);
});
after(async () => {
  app?.child.kill();
  await svc?.stop();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command without blocking this process (the service answers from this same event loop). */
function run(cmd: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Run> {
  const t0 = performance.now();
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd: options.cwd ?? ROOT, env: options.env ?? cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr, ms: performance.now() - t0 }));
  });
}

/** The environment of a CI step: this Node (and its npx) first on PATH, the service in EPHEMAIL_URL. */
function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
    EPHEMAIL_URL: svc.http,
    APP_URL: app.url,
    // npx must find the package locally (it is not fetched: a registry lookup would be a bug here)
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    // no remembered keys: each step here mints as a first run does (test/client/key-cache.test.ts tests the cache)
    EPHEMAIL_KEY_CACHE: 'off',
  };
  delete env.EPHEMAIL_API_KEY;
  return { ...env, ...extra };
}

const cli = (args: string[], extra: Record<string, string> = {}) => run(process.execPath, [BIN, ...args], { env: cliEnv(extra) });

/** The README's recipe: the first sh block after its marker comment. */
function recipe(): string {
  const text = readFileSync(README, 'utf8');
  const at = text.indexOf('<!-- recipe:');
  assert.ok(at >= 0, 'the recipe marker is in packages/client/README.md');
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(block, 'a sh block follows the marker');
  return block[1];
}

/** Runs the recipe as a CI step does (GitHub Actions: bash --noprofile --norc -eo pipefail), then prints its variables. */
async function runRecipe(cwd: string): Promise<Run & { vars: Record<string, string> }> {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-recipe-'));
  try {
    const script = join(dir, 'step.sh');
    writeFileSync(script, `${recipe()}\nprintf 'ADDR=%s\\nCODE=%s\\n' "$ADDR" "$CODE"\n`);
    const r = await run('bash', ['--noprofile', '--norc', '-eo', 'pipefail', script], { cwd, env: cliEnv() });
    const vars = Object.fromEntries(r.stdout.split('\n').filter((l) => /^[A-Z]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    return { ...r, vars };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the README recipe works as written: inbox, sign up with curl, CODE=$(npx @ephemail/client wait … --code --subject verify), verified', async () => {
  const r = await runRecipe(ROOT);
  assert.equal(r.code, 0, `the recipe failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  assert.match(r.vars.ADDR ?? '', /^[a-z0-9]{10}@ephemail\.test$/);
  assert.match(r.vars.CODE ?? '', /^\d{6}$/);
  // the code printed is the one in the email the app sent
  const list = await (await svc.api(`/api/v1/inboxes/${r.vars.ADDR}/emails`)).json();
  const email = await (await svc.api(`/api/v1/emails/${list.data[0].id}`)).json();
  assert.equal(email.data.codes[0].value, r.vars.CODE);
});

test('the packed package, installed on its own (no server), runs the recipe with npx @ephemail/client', { timeout: 300_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-client-pack-'));
  try {
    const env = cliEnv({ npm_config_offline: 'false', npm_config_prefer_offline: 'true' });
    const pack = await run('npm', ['pack', '--pack-destination', dir], { cwd: CLIENT, env });
    assert.equal(pack.code, 0, pack.stderr);
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    const listing = await run('tar', ['-tzf', join(dir, tarball)], { env });
    assert.match(listing.stdout, /package\/bin\/ephemail-client\.js/);
    const project = join(dir, 'project');
    await run('mkdir', [project], { env });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'ci-step', version: '1.0.0', private: true }));
    // its one dependency (openapi-fetch) from the npm cache or registry, as a user gets it
    const install = await run('npm', ['install', '--no-audit', '--no-fund', join(dir, tarball)], { cwd: project, env });
    assert.equal(install.code, 0, install.stderr);
    const installed = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')).packages;
    assert.ok(installed['node_modules/@ephemail/client'], 'the client is installed');
    assert.ok(!installed['node_modules/ephemail'], 'the server is not');
    const r = await runRecipe(project);
    assert.equal(r.code, 0, `the recipe failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    assert.match(r.vars.CODE ?? '', /^\d{6}$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('inbox prints a new address; --local-part and --domain choose it', async () => {
  const r = await cli(['inbox']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^[a-z0-9]{10}@ephemail\.test\n$/);
  assert.equal(r.stderr, '');
  const named = await cli(['inbox', '--local-part', 'ci-step-1', '--domain', 'ephemail.test']);
  assert.equal(named.stdout, 'ci-step-1@ephemail.test\n');
  const bad = await cli(['inbox', '--domain', 'nowhere.example']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^ephemail-client: .*nowhere\.example.*\n$/);
});

test('wait prints the code, a link, the JSON or the id of the newest matching email', async () => {
  const address = (await cli(['inbox'])).stdout.trim();
  const pending = cli(['wait', address, '--code', '--subject', 'verify', '--timeout', '20']);
  await until(async () => (await metric(svc.http, 'ephemail_waits_held')) === 1, 'the CLI holds its wait');
  await svc.send({ to: address, subject: 'Weekly news', text: 'nothing to see' });
  await svc.send({
    from: 'GitHub <noreply@github.example>',
    to: address,
    subject: 'Please verify your email',
    text: 'Your verification code is 559 120.',
    html: '<p>Your verification code is <b>559 120</b>.</p><p><a href="https://app.example/verify?t=9">Verify email</a> <a href="https://app.example/reset?t=1">Reset your password</a></p>',
  });
  const code = await pending;
  assert.equal(code.code, 0, code.stderr);
  assert.equal(code.stdout, '559120\n');
  assert.equal((await cli(['wait', address, '--link', 'verify'])).stdout, 'https://app.example/verify?t=9\n');
  assert.equal((await cli(['wait', address, '--link', 'reset_password'])).stdout, 'https://app.example/reset?t=1\n');
  const json = await cli(['wait', address, '--json', '--from', 'github']);
  const email = JSON.parse(json.stdout);
  assert.equal(email.subject, 'Please verify your email');
  assert.deepEqual(email.codes.map((c: { value: string }) => c.value), ['559120']);
  const id = (await cli(['wait', address, '--subject', 'weekly'])).stdout.trim();
  assert.match(id, /^[0-9a-f-]{36}$/);
  assert.notEqual(id, email.id);
  // --since: only mail after that email (the "resend the code" wait)
  const later = cli(['wait', address, '--code', '--since', email.id, '--timeout', '20']);
  await until(async () => (await metric(svc.http, 'ephemail_waits_held')) === 1, 'the CLI holds its wait');
  await svc.send({ to: address, subject: 'Your new code', text: 'Your verification code is 730 114.' });
  assert.equal((await later).stdout, '730114\n');
  const since = await cli(['wait', address, '--since', new Date(Date.now() + 60_000).toISOString(), '--timeout', '1']);
  assert.equal(since.code, 1, 'nothing after a future time');
});

test('a wait that runs out exits 1 with one line; no code or link exits 1 too', async () => {
  const address = (await cli(['inbox'])).stdout.trim();
  const r = await cli(['wait', address, '--code', '--subject', 'verify', '--from', 'app', '--timeout', '1.5']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr, `ephemail-client: timed out: no email from "app" with subject "verify" at ${address} within 1.5 s\n`);
  // held for whole seconds within the timeout (as the client's waitForEmail), then one last look
  // bound: the 1 s --timeout is observed (lower bound); the upper one generous for a loaded machine
  assert.ok(r.ms >= 900 && r.ms < 8000, `took ${r.ms} ms`);
  await svc.send({ to: address, subject: 'Welcome', text: 'Thanks for joining.' });
  const noCode = await cli(['wait', address, '--code']);
  assert.equal(noCode.code, 1);
  assert.match(noCode.stderr, /^ephemail-client: the email [0-9a-f-]{36} \("Welcome"\) has no verification code\n$/);
  const noLink = await cli(['wait', address, '--link', 'login']);
  assert.equal(noLink.code, 1);
  assert.match(noLink.stderr, /has no login link\n$/);
});

test('usage errors exit 2 with one line', async () => {
  for (const args of [
    [],
    ['frob'],
    ['wait'],
    ['wait', 'a@ephemail.test', 'b@ephemail.test'],
    ['wait', 'a@ephemail.test', '--code', '--json'],
    ['wait', 'a@ephemail.test', '--link', 'nonsense'],
    ['wait', 'a@ephemail.test', '--link'],
    ['wait', 'a@ephemail.test', '--timeout', 'soon'],
    ['wait', 'a@ephemail.test', '--timeout', '0'],
    ['wait', 'a@ephemail.test', '--since', 'yesterday'],
    ['wait', 'a@ephemail.test', '--bogus'],
    ['inbox', '--code'],
    ['inbox', 'extra'],
    ['key', '--subject', 'x'],
  ]) {
    const r = await cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^ephemail-client: [^\n]+ \(see ephemail-client --help\)\n$/, args.join(' '));
  }
  const url = await cli(['inbox'], { EPHEMAIL_URL: 'localhost:8025' });
  assert.equal(url.code, 2);
  assert.match(url.stderr, /must start with http/);
});

test('--help documents the commands, options, environment and exit statuses; --version', async () => {
  const r = await cli(['--help']);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, HELP);
  for (const word of ['inbox', 'wait <address>', '--code', '--link <kind>', '--json', '--subject', '--from', '--since', '--timeout', 'EPHEMAIL_URL', 'EPHEMAIL_API_KEY', 'Exit status', 'key']) {
    assert.ok(HELP.includes(word), word);
  }
  assert.equal((await cli(['help'])).stdout, HELP);
  assert.equal((await cli(['wait', '-h'])).stdout, HELP);
  const version = await cli(['--version']);
  assert.equal(version.stdout, `${JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')).version}\n`);
});

test('the key: EPHEMAIL_API_KEY is used as given; `key` mints one; a refused mint says what to do', async () => {
  const key = (await cli(['key'])).stdout.trim();
  assert.match(key, /^eph_[A-Za-z0-9]{40}$/);
  const address = (await cli(['inbox'])).stdout.trim();
  await svc.send({ to: address, subject: 'Your code', text: 'Your verification code is 4821.' });
  assert.equal((await cli(['wait', address, '--code'], { EPHEMAIL_API_KEY: key })).stdout, '4821\n');
  const wrong = await cli(['wait', address, '--code'], { EPHEMAIL_API_KEY: `eph_${'x'.repeat(40)}` });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /^ephemail-client: The API key is not valid[^\n]*\n$/);
  // a service that lets this IP mint no more keys
  const strict = await startService({ EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '1' }, { mounts: [] });
  try {
    assert.equal((await cli(['key'], { EPHEMAIL_URL: strict.http })).code, 0);
    const refused = await cli(['wait', address, '--code', '--timeout', '2'], { EPHEMAIL_URL: strict.http });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^ephemail-client: cannot mint an API key for the wait: .* Set EPHEMAIL_API_KEY \(or pass apiKey\) to a key you have, or try again after \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\.\n$/);
  } finally {
    await strict.stop();
  }
});

test('a service that cannot be reached: exit 1, one line naming it', async () => {
  const port = await freePort();
  const r = await cli(['inbox'], { EPHEMAIL_URL: `http://127.0.0.1:${port}` });
  assert.equal(r.code, 1);
  assert.equal(r.stderr, `ephemail-client: cannot reach http://127.0.0.1:${port} (ECONNREFUSED): is ephemail running there? (EPHEMAIL_URL)\n`);
});

test('an answer without a field the command reads: exit 1, one line naming the field', async () => {
  // a stand-in for a service of another version: its email has no `codes`
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && req.url === '/api/v1/keys') {
      res.statusCode = 201;
      return res.end(JSON.stringify({ data: { api_key: `eph_${'a'.repeat(40)}` } }));
    }
    res.end(JSON.stringify({ data: { id: '01a20000-0000-7000-8000-000000000000', subject: 'Verify', verification_codes: [], links: [] }, meta: { waited: false } }));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  try {
    const r = await cli(['wait', 'a@ephemail.test', '--code'], { EPHEMAIL_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^ephemail-client: the service's answer to GET \/api\/v1\/inboxes\/\{address\}\/latest has no "data\.codes": the service and this client \([\d.]+\) disagree on the API\n$/);
  } finally {
    server.close();
  }
});

// -- the contract: every field the command reads, in the live OpenAPI document ---------------------

type Schema = Record<string, any>;

/** Each read of `reads` that `doc` does not promise (missing, or not required), one line each. */
function checkReads(doc: Schema, reads: typeof READS): string[] {
  const problems: string[] = [];
  const resolve = (s: Schema): Schema => {
    while (s && typeof s.$ref === 'string') s = s.$ref.slice(2).split('/').reduce((n: Schema, p: string) => n[p], doc);
    return s;
  };
  const alternatives = (s: Schema): Schema[] => {
    const r = resolve(s);
    const list = r?.anyOf ?? r?.oneOf;
    return list ? list.flatMap(alternatives) : [r];
  };
  for (const [op, status, path] of reads) {
    const [method, p] = op.split(' ');
    const response = doc.paths?.[p]?.[method.toLowerCase()]?.responses?.[status];
    if (!response) {
      problems.push(`${op} ${status}: not in the contract`);
      continue;
    }
    if (path[0] === 'headers') {
      if (!resolve(response).headers?.[path[1]]) problems.push(`${op} ${status}: the contract declares no ${path[1]} header`);
      continue;
    }
    let schema: Schema = resolve(response).content?.['application/json']?.schema;
    let where = `${op} ${status} body`;
    for (const step of path) {
      if (step === '[]') {
        const array = alternatives(schema).find((a) => a?.type === 'array');
        if (!array) {
          problems.push(`${where}: not an array in the contract`);
          break;
        }
        schema = array.items;
        where += '[]';
        continue;
      }
      const object = alternatives(schema).find((a) => a?.type === 'object' || a?.properties);
      if (!object?.properties?.[step]) {
        problems.push(`${where}: the contract has no field '${step}'`);
        break;
      }
      if (!object.required?.includes(step)) problems.push(`${where}: the field '${step}' is not required in the contract`);
      schema = object.properties[step];
      where += `.${step}`;
    }
  }
  return problems;
}

async function openapi(): Promise<Schema> {
  return (await svc.api('/api/v1/openapi.json')).json();
}

test('every response field the command reads is in the live OpenAPI document, required', async () => {
  const doc = await openapi();
  assert.deepEqual(checkReads(doc, READS), []);
  const kinds = alternatives(doc, doc.components.schemas.Link.properties.kind).flatMap((a) => a.enum ?? []);
  assert.deepEqual([...LINK_KINDS].sort(), [...kinds].sort(), '--link takes exactly the link kinds of the contract');
});

test("the client's main action kinds are the server's", () => {
  assert.deepEqual([...ACTION_LINK_KINDS], [...ACTION_KINDS]);
});

function alternatives(doc: Schema, s: Schema): Schema[] {
  const r = typeof s.$ref === 'string' ? s.$ref.slice(2).split('/').reduce((n: Schema, p: string) => n[p], doc) : s;
  const list = r.anyOf ?? r.oneOf;
  return list ? list.flatMap((x: Schema) => alternatives(doc, x)) : [r];
}

test('the check fails when a field the command reads is missing or optional', async () => {
  const doc = await openapi();
  const broken = structuredClone(doc);
  delete broken.components.schemas.Code.properties.value;
  broken.components.schemas.Code.required = broken.components.schemas.Code.required.filter((r: string) => r !== 'value');
  assert.deepEqual(checkReads(broken, READS), ["GET /api/v1/inboxes/{address}/latest 200 body.data.codes[]: the contract has no field 'value'"]);
  const optional = structuredClone(doc);
  optional.components.schemas.Email.required = optional.components.schemas.Email.required.filter((r: string) => r !== 'links');
  assert.equal(checkReads(optional, READS).filter((p) => p.includes("the field 'links' is not required")).length, 2);
});
