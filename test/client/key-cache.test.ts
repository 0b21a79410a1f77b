// Clients that remember their key (packages/client/src/key-cache.js): the JS client and its
// `ephemail-client` command keep a key they minted for a base URL in the user's cache file (mode 600),
// so the next client or run mints nothing; EPHEMAIL_API_KEY (apiKey) wins; a remembered key the
// service does not know is replaced; a refused mint says what to do. The service here lets one IP
// mint ONE key a day: any second mint would be refused.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createEphemail, EphemailError } from '@ephemail/client';
import { fileKeyCache, keyCachePath } from '../../packages/client/src/key-cache.js';
import { ROOT } from '../helpers/serve.ts';
import { startService, type TestService } from '../helpers/service.ts';

const BIN = join(ROOT, 'packages/client/bin/ephemail-client.js');
let svc: TestService;
let dir: string;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '1' }, { mounts: [] });
  dir = mkdtempSync(join(tmpdir(), 'ephemail-keys-'));
});
after(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const remembered = (file: string, baseUrl: string): string | undefined => JSON.parse(readFileSync(file, 'utf8')).keys[baseUrl]?.api_key;

function cli(args: string[], env: Record<string, string | undefined>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const full: NodeJS.ProcessEnv = { ...process.env, EPHEMAIL_URL: svc.http, ...env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete full[k];
    const child = spawn(process.execPath, [BIN, ...args], { env: full, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

test('the cache file: EPHEMAIL_KEY_CACHE, else $XDG_CACHE_HOME/ephemail/keys.json, else ~/.cache/ephemail/keys.json; off: none', () => {
  assert.equal(keyCachePath({ EPHEMAIL_KEY_CACHE: '/x/k.json', XDG_CACHE_HOME: '/y' }), '/x/k.json');
  assert.equal(keyCachePath({ XDG_CACHE_HOME: '/y' }), '/y/ephemail/keys.json');
  assert.equal(keyCachePath({}), join(homedir(), '.cache/ephemail/keys.json'));
  assert.equal(keyCachePath({ XDG_CACHE_HOME: 'relative' }), join(homedir(), '.cache/ephemail/keys.json'));
  assert.equal(keyCachePath({ EPHEMAIL_KEY_CACHE: 'off' }), null);
});

test('the shell command: `wait` mints once and remembers (mode 600); a re-run, `key` and the JS client mint nothing; EPHEMAIL_API_KEY wins', async () => {
  const file = join(dir, 'xdg', 'ephemail', 'keys.json');
  const env = { EPHEMAIL_KEY_CACHE: undefined, XDG_CACHE_HOME: join(dir, 'xdg'), EPHEMAIL_API_KEY: undefined };
  const address = (await cli(['inbox'], env)).stdout.trim();
  await svc.send({ to: address, subject: 'Verify your email', text: 'Your verification code is 482913.' });
  const first = await cli(['wait', address, '--code', '--subject', 'verify', '--timeout', '10'], env);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, '482913\n');
  const key = remembered(file, svc.http);
  assert.match(key ?? '', /^eph_[A-Za-z0-9]{40}$/);
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(statSync(join(dir, 'xdg', 'ephemail')).mode & 0o777, 0o700);
  // the re-run: the one key this IP may mint today is taken, so any mint would be refused
  const again = await cli(['wait', address, '--code', '--subject', 'verify', '--timeout', '10'], env);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, '482913\n');
  assert.equal((await cli(['key'], env)).stdout, `${key}\n`, '`key` prints the remembered key');
  // the JS client, by default in Node, reads the same file
  const saved = { xdg: process.env.XDG_CACHE_HOME, cache: process.env.EPHEMAIL_KEY_CACHE };
  try {
    process.env.XDG_CACHE_HOME = join(dir, 'xdg');
    delete process.env.EPHEMAIL_KEY_CACHE;
    const mail = createEphemail({ baseUrl: svc.http });
    assert.equal(mail.apiKey, null, 'nothing read before a key is needed');
    assert.equal(await mail.ensureKey(), key);
    assert.equal(await mail.inbox(address).waitForCode({ since: '00000000-0000-7000-8000-000000000000', timeoutMs: 5000 }), '482913');
  } finally {
    if (saved.xdg === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved.xdg;
    if (saved.cache === undefined) delete process.env.EPHEMAIL_KEY_CACHE;
    else process.env.EPHEMAIL_KEY_CACHE = saved.cache;
  }
  // EPHEMAIL_API_KEY wins over the remembered key (a wrong one is refused as it is), and is not remembered
  const wrong = await cli(['wait', address, '--code', '--timeout', '5'], { ...env, EPHEMAIL_API_KEY: `eph_${'x'.repeat(40)}` });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /^ephemail-client: The API key is not valid/);
  assert.equal(remembered(file, svc.http), key);
});

test('the JS client: a remembered key the service does not know is replaced by one minted now; apiKey wins; keyCache: false remembers nothing', async () => {
  const other = await startService({}, { mounts: [] });
  try {
    const file = join(dir, 'js', 'keys.json');
    const cache = fileKeyCache(file);
    const stale = `eph_${'s'.repeat(40)}`;
    cache.set(other.http, stale);
    const mail = createEphemail({ baseUrl: other.http, keyCache: cache });
    const inbox = await mail.createInbox();
    await other.send({ to: inbox.address, subject: 'Verify your email', text: 'Your verification code is 559 120.' });
    assert.equal(await inbox.waitForCode({ subject: 'verify', timeoutMs: 10_000 }), '559120');
    assert.match(mail.apiKey ?? '', /^eph_[A-Za-z0-9]{40}$/);
    assert.notEqual(mail.apiKey, stale);
    assert.equal(remembered(file, other.http), mail.apiKey, 'the new key in place of the stale one');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    // a key given wins and is not remembered
    const given = `eph_${'g'.repeat(40)}`;
    assert.equal(await createEphemail({ baseUrl: other.http, apiKey: given, keyCache: cache }).ensureKey(), given);
    assert.equal(remembered(file, other.http), mail.apiKey);
    // keyCache: false: minted, nothing written
    const none = join(dir, 'none', 'keys.json');
    const saved = process.env.EPHEMAIL_KEY_CACHE;
    process.env.EPHEMAIL_KEY_CACHE = none;
    try {
      const fresh = await createEphemail({ baseUrl: other.http, keyCache: false }).ensureKey();
      assert.notEqual(fresh, mail.apiKey);
      assert.equal(existsSync(none), false);
    } finally {
      if (saved === undefined) delete process.env.EPHEMAIL_KEY_CACHE;
      else process.env.EPHEMAIL_KEY_CACHE = saved;
    }
  } finally {
    await other.stop();
  }
});

test('a refused mint says what to do: EPHEMAIL_API_KEY, or try again after <time>', async () => {
  // this IP's one key of the day is taken (the tests above): an empty cache must mint, and is refused
  const empty = fileKeyCache(join(dir, 'empty', 'keys.json'));
  const t0 = Date.now();
  const err: EphemailError = await createEphemail({ baseUrl: svc.http, keyCache: empty }).ensureKey().then(
    () => assert.fail('a second key was minted'),
    (e) => e,
  );
  assert.ok(err instanceof EphemailError);
  assert.equal(err.status, 429);
  const m = /^This IP address already created 1 keys in the last 24 hours; .* Reuse a key you have\. Set EPHEMAIL_API_KEY \(or pass apiKey\) to a key you have, or try again after (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\.$/.exec(err.message);
  assert.ok(m, err.message);
  const at = Date.parse(m[1]!);
  assert.ok(Math.abs(at - (t0 + (err.retryAfter ?? 0) * 1000)) < 30_000, `${m[1]} is retry-after (${err.retryAfter} s) from now`);
  assert.ok(err.retryAfter! > 3600, 'the day is not over');
  assert.equal(existsSync(join(dir, 'empty', 'keys.json')), false, 'nothing remembered');
  // the command: one line, the same advice
  const r = await cli(['wait', 'a@ephemail.test', '--code', '--timeout', '2'], { EPHEMAIL_KEY_CACHE: join(dir, 'empty2.json'), EPHEMAIL_API_KEY: undefined });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^ephemail-client: cannot mint an API key for the wait: This IP address already created 1 keys .* Set EPHEMAIL_API_KEY \(or pass apiKey\) to a key you have, or try again after \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\.\n$/);
});
