// Redocly's lint (its recommended rules) is clean on the served OpenAPI document: optional is
// optional, every operation declares its security (public ones with the anonymous {} option), each
// has a 4xx, no component is unused, the info has a license.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';

let svc: TestService;
const dir = mkdtempSync(join(tmpdir(), 'ephemail-lint-'));
before(async () => {
  // as deployed: a local run's servers[0] is http://localhost:<port>, which the rule no-server-example.com flags by design;
  // with the admin API on, so its routes, tag and security scheme are linted too
  svc = await startService({ EPHEMAIL_PUBLIC_URL: 'https://mail.ephemail.test', EPHEMAIL_ADMIN_TOKEN: 'lint-admin-token-0123456789abcdefghij' });
});
after(async () => {
  await svc.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('redocly lint: no error, no warning', async () => {
  const doc = await (await svc.api('/api/v1/openapi.json')).json();
  const file = join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(doc, null, 1));
  const bin = resolve(import.meta.dirname, '../../node_modules/.bin/redocly');
  const r = spawnSync(bin, ['lint', file, '--format=json'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
  });
  const start = r.stdout.indexOf('{');
  assert.ok(start >= 0, `redocly printed a JSON report: ${r.stdout.slice(0, 300)} ${r.stderr.slice(0, 300)}`);
  const report = JSON.parse(r.stdout.slice(start)) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string; location: { pointer: string }[] }[] };
  const problems = report.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
  assert.deepEqual(problems, [], 'redocly problems');
  assert.equal(report.totals.errors, 0);
  assert.equal(report.totals.warnings, 0);
  assert.equal(r.status, 0, r.stderr);
});
