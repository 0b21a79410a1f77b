// package.json's runtime dependencies are exactly what the service loads (issue 36: a repository that
// stands on its own): every entry of "dependencies" is imported by something under src/ or bin/, every
// package src/ imports at run time is in "dependencies" (an installed package has nothing else), and
// the build tools (tsx, esbuild) are dev dependencies only: the service runs dist/, built ahead of time.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (/\.(ts|js|mjs|cjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`); null for node's own and relative ones. */
function packageOf(spec: string): string | null {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:') || spec.startsWith('data:')) return null;
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
  return builtinModules.includes(name) ? null : name;
}

/**
 * Packages a file loads, by file: `import … from 'x'`, `import 'x'`, `export … from 'x'`, `import('x')`,
 * `require('x')` (and createRequire's `requireOnUse('x')`); `import type` (gone at run time) is not one.
 */
function imports(files: string[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const patterns = [
    /^\s*(?:import|export)\s+(?!type\s)(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]/gm,
    /\b(?:import|require|requireOnUse)\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const re of patterns) {
      for (const m of text.matchAll(re)) {
        const name = packageOf(m[1]!);
        if (!name) continue;
        if (!out.has(name)) out.set(name, new Set());
        out.get(name)!.add(relative(root, file));
      }
    }
  }
  return out;
}

const srcFiles = walk(join(root, 'src'));
const binFiles = walk(join(root, 'bin'));
const used = imports([...srcFiles, ...binFiles]);
const runtime = Object.keys(pkg.dependencies ?? {});
const dev = Object.keys(pkg.devDependencies ?? {});

test('every runtime dependency is imported by something under src/ or bin/', () => {
  const unused = runtime.filter((d) => !used.has(d));
  assert.deepEqual(unused, [], `package.json "dependencies" that nothing under src/ or bin/ imports (remove them, or move them to devDependencies): ${unused.join(', ')}`);
});

test('tsx and esbuild are dev dependencies, never runtime ones: the service runs dist/, built ahead of time', () => {
  for (const tool of ['tsx', 'esbuild']) {
    assert.ok(!runtime.includes(tool), `${tool} is in "dependencies": it is a build and development tool (devDependencies)`);
    assert.ok(dev.includes(tool), `${tool} is not in "devDependencies" (scripts/build.mjs needs esbuild; EPHEMAIL_TSX=1 and the tests need tsx)`);
  }
});

test('every package src/ loads at run time is a runtime dependency', () => {
  // bin/ephemail.js loads tsx only for EPHEMAIL_TSX=1 (development, dev dependencies)
  const fromSrc = imports(srcFiles);
  const undeclared = [...fromSrc.entries()].filter(([name]) => !runtime.includes(name)).map(([name, files]) => `${name} (${[...files].join(', ')})`);
  assert.deepEqual(undeclared, [], `imported under src/ but not in package.json "dependencies" (an installed package would not have them): ${undeclared.join('; ')}`);
});
