// The operator CLI (docs/contract-decisions.md "Running it"): `ephemail keys list` and `ephemail keys revoke
// <prefix>` against the same store the service uses; a revoked key then gets 401 unauthorized.
import assert from 'node:assert/strict';
import { until } from '../helpers/time.ts';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { startService, type TestService } from '../helpers/service.ts';
import { expectError } from '../helpers/contract.ts';

const run = promisify(execFile);
const BIN = resolve(import.meta.dirname, '../../bin/ephemail.js');
let dir: string;
let store: string;
let svc: TestService;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ephemail-cli-'));
  store = `sqlite:${join(dir, 'cli.db')}`;
  svc = await startService({ EPHEMAIL_STORE: store });
});
after(async () => {
  await svc.stop();
  rmSync(dir, { recursive: true, force: true });
});

const cli = async (...args: string[]) => {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, EPHEMAIL_STORE: store, EPHEMAIL_LOG_LEVEL: 'silent' }, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err: any) {
    return { code: err.code as number, stdout: err.stdout as string, stderr: err.stderr as string };
  }
};

test('keys list on an empty store', async () => {
  const r = await cli('keys', 'list');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /no keys/i);
});

test('list shows prefix, label, created_at and state, never the raw key or its hash; revoke then 401', async () => {
  const mint = async (label: string) => (await (await svc.api('/api/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label }) })).json()).data;
  const a = await mint('alpha integration');
  const b = await mint('beta');
  const listed = await cli('keys', 'list');
  assert.equal(listed.code, 0, listed.stderr);
  const lines = listed.stdout.trim().split('\n');
  assert.equal(lines.length, 2);
  assert.ok(lines[0].includes(a.key_prefix) && lines[0].includes('alpha integration') && lines[0].includes(a.created_at) && /active/.test(lines[0]), lines[0]);
  assert.ok(lines[1].includes(b.key_prefix) && lines[1].includes('beta'), lines[1]);
  for (const k of [a, b]) {
    assert.ok(!listed.stdout.includes(k.api_key), 'raw key never printed');
    assert.ok(!listed.stdout.includes(k.api_key.slice(12)), 'no tail of the key either');
  }
  assert.doesNotMatch(listed.stdout, /[0-9a-f]{64}/, 'no SHA-256 hash printed');

  assert.equal((await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${a.api_key}` } })).status, 200);
  const revoked = await cli('keys', 'revoke', a.key_prefix);
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.ok(revoked.stdout.includes(a.key_prefix), revoked.stdout);
  assert.ok(!revoked.stdout.includes(b.key_prefix), 'only the named key');

  const base = svc.http.replace('127.0.0.1', 'localhost');
  // a revocation made by another process shows within the read cache's 250 ms (docs/decisions.md
  // "Read caching"): the CLI may finish sooner than that after the read above
  await until(async () => (await svc.api('/api/v1/me', { headers: { authorization: `Bearer ${a.api_key}` } })).status === 401, 'the revocation shows (within 250 ms)', 2000, 25);
  for (const headers of [{ authorization: `Bearer ${a.api_key}` }, { 'x-api-key': a.api_key }] as Record<string, string>[]) {
    await expectError(await svc.api('/api/v1/me', { headers }), 401, 'unauthorized', base, /revoked/);
    await expectError(await svc.api('/api/v1/domains', { headers }), 401, 'unauthorized', base);
  }
  assert.equal((await svc.api('/api/v1/me', { headers: { 'x-api-key': b.api_key } })).status, 200, 'the other key still works');

  const after = await cli('keys', 'list');
  const line = after.stdout.split('\n').find((l) => l.includes(a.key_prefix)) ?? '';
  assert.match(line, /revoked/);
  assert.match(after.stdout.split('\n').find((l) => l.includes(b.key_prefix)) ?? '', /active/);

  // revoking again finds nothing live: non-zero exit, says so
  const again = await cli('keys', 'revoke', a.key_prefix);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /no active key/i);
});

test('revoke needs the whole 12-character prefix: a shorter one, a longer one or none is refused (exit 2)', async () => {
  assert.equal((await cli('keys', 'revoke', 'eph')).code, 2);
  const six = await cli('keys', 'revoke', 'eph_Ab');
  assert.equal(six.code, 2, 'a 6-character prefix could match many keys');
  assert.match(six.stderr, /whole 12-character prefix/);
  assert.equal((await cli('keys', 'revoke', 'eph_AbCdEfG')).code, 2, '11 characters');
  assert.equal((await cli('keys', 'revoke', 'eph_AbCdEfGhX')).code, 2, '13 characters');
  assert.equal((await cli('keys', 'revoke')).code, 2);
  assert.equal((await cli('keys', 'frobnicate')).code, 2);
});
