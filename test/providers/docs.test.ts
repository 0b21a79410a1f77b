// docs/providers.md's snippets run as written: each js block, as its own ES module (node, from the
// repository so the SDKs resolve), with EPHEMAIL_URL set to a running ephemail; the mail each one
// sends lands in the inbox it names.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { inbox, startProviderService, type TestService } from './helpers.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DOC = readFileSync(join(ROOT, 'docs/providers.md'), 'utf8');
const SNIPPETS = [...DOC.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);

let svc: TestService;
before(async () => {
  svc = await startProviderService();
});
after(() => svc.stop());

function run(code: string): Promise<{ code: number | null; out: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--input-type=module'], { cwd: ROOT, env: { ...process.env, EPHEMAIL_URL: svc.http }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (c) => done({ code: c, out }));
    child.stdin.end(code);
  });
}

test('one snippet per SDK (and nodemailer\'s SES transport)', () => {
  assert.equal(SNIPPETS.length, 7);
});

for (const [i, code] of SNIPPETS.entries()) {
  const address = /'([\w-]+-demo@ephemail\.test)'/.exec(code)?.[1];
  test(`snippet ${i + 1} (${address}) runs and its mail lands`, async () => {
    assert.ok(address, 'the snippet names its demo inbox');
    const { code: exit, out } = await run(code);
    assert.equal(exit, 0, out);
    const list = await inbox(svc, address);
    assert.equal(list.length, 1, out);
    assert.equal(list[0].subject, 'Welcome');
    const latest = await (await svc.api(`/api/v1/inboxes/${address}/latest`)).json();
    assert.deepEqual(latest.data.codes.map((c: any) => c.value), ['482913']);
  });
}
