// One configuration table: every EPHEMAIL_* variable loadConfig reads is a row of VARIABLES, each
// row's default is what loadConfig({}) gives, and the README's "Configuration" table lists exactly
// these variables with the same defaults.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { VARIABLES, loadConfig } from '../src/config.ts';

const root = resolve(import.meta.dirname, '..');

/** README rows `| \`EPHEMAIL_A_X\` / \`_Y\` | \`1\` / \`2\` | … |` → { EPHEMAIL_A_X: '1', EPHEMAIL_A_Y: '2' }. */
function readmeTable(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(resolve(root, 'README.md'), 'utf8').split('\n')) {
    const m = /^\| (`EPHEMAIL_[A-Z0-9_]+`(?: \/ `_[A-Z0-9_]+`)?) \| ([^|]+) \|/.exec(line);
    if (!m) continue;
    const names = m[1].split(' / ').map((n) => n.replace(/`/g, ''));
    const defaults = m[2].trim().split(' / ').map((d) => d.replace(/`/g, '').trim());
    const first = names[0];
    names.forEach((n, i) => {
      // `_PER_DAY` replaces as many trailing words of the first name (`_PER_MINUTE`), `_KEY` one (`_CERT`)
      const name = n.startsWith('_') ? first.split('_').slice(0, -(n.split('_').length - 1)).join('_') + n : n;
      out.set(name, defaults[i] ?? defaults[0]);
    });
  }
  return out;
}

test('every variable config.ts reads has a row, and no row is unused', () => {
  const source = readFileSync(resolve(root, 'src/config.ts'), 'utf8').replace(/export const VARIABLES[\s\S]*?\]\);/, '');
  const read = new Set(source.match(/EPHEMAIL_[A-Z0-9_]+/g));
  const rows = new Set(VARIABLES.map((v) => v.name));
  assert.deepEqual([...read].filter((n) => !rows.has(n)).sort(), [], 'read but not in VARIABLES');
  assert.deepEqual([...rows].filter((n) => !read.has(n)).sort(), [], 'in VARIABLES but never read');
});

test('each default in the table is what loadConfig({}) gives', () => {
  const c = loadConfig({});
  for (const v of VARIABLES) {
    if (!v.of) continue;
    const got = v.of(c);
    assert.equal(String(got), v.default, `${v.name}: loadConfig gives ${JSON.stringify(got)}, the table says ${v.default}`);
  }
});

test('the README lists exactly these variables with the same defaults', () => {
  const readme = readmeTable();
  assert.deepEqual([...readme.keys()].sort(), VARIABLES.map((v) => v.name).sort());
  for (const v of VARIABLES) assert.equal(readme.get(v.name), v.default, `${v.name} default in README.md`);
});
