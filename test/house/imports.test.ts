// The house's layering (docs/house-style.md, docs/architecture.md), read from the imports of src/**/*.ts
// (static, type-only, re-exports and dynamic import() alike):
// - domain/ imports nothing of the project outside domain/;
// - derive/ nothing from services/, store/ or a transport; services/ nothing from smtp/, http/, mcp/, web/;
//   smtp/ nothing from mcp/, http/, web/, nor from derive/ (an adapter of ingest: services/ingest.ts parses);
//   mcp/ nothing from http/, web/; store/ nothing from services/;
// - no package is imported by a private path (`pkg/lib/…`, `pkg/dist/…`);
// and no module-level mutable state: no top-level `let` or `var`, no top-level empty Map, Set,
// WeakMap, WeakSet or array to be filled at run time (state lives in what a factory returns).
// ALLOWED lists what remains today, each with the work that removes it; it only shrinks.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const SRC = resolve(import.meta.dirname, '../../src');

/** Folder → the project folders it must not import from. */
const FORBIDDEN: Record<string, readonly string[]> = {
  derive: ['services', 'smtp', 'http', 'mcp', 'web', 'store'],
  services: ['smtp', 'http', 'mcp', 'web'],
  // the SMTP adapter hands bytes to ingest (services/ingest.ts), which picks where they are parsed
  smtp: ['mcp', 'http', 'web', 'derive'],
  mcp: ['http', 'web'],
  store: ['services'],
};

/** Edges that break a rule today, as `from-file -> imported-file` (paths under src/). */
const ALLOWED_EDGES: ReadonlySet<string> = new Set([]);

/**
 * Private package paths imported on purpose. mailauth has no "exports" map; its README documents
 * `mailauth/lib/dkim/verify` and `mailauth/lib/spf` and it ships typings for each of these four
 * (an index.d.ts in lib/arc, lib/dmarc and lib/spf; lib/dkim/verify.d.ts). Its main entry would
 * load BIMI's stack (~10 MB per thread), never used here (issue 34; test/derive/authenticate.test.ts
 * checks that it stays unloaded).
 */
const ALLOWED_PRIVATE_PATHS: ReadonlySet<string> = new Set([
  'derive/authenticate.ts: mailauth/lib/arc/index.js',
  'derive/authenticate.ts: mailauth/lib/dkim/verify.js',
  'derive/authenticate.ts: mailauth/lib/dmarc/index.js',
  'derive/authenticate.ts: mailauth/lib/spf/index.js',
]);

/** Top-level mutable bindings that remain today, as `file: name`. */
const ALLOWED_STATE: ReadonlySet<string> = new Set([
  // Caches of a worker thread's module instance (each worker has its own), bounded: the verdicts'
  // DNS answers (one resolver per worker, replaced when the servers change) and the search text's
  // TextDecoder per charset label (at most 64). Neither changes what any caller sees.
  'derive/authenticate.ts: shared',
  'derive/search-text.ts: decoders',
]);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'assets' ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

const files = sourceFiles(SRC).map((path) => ({ path, rel: relative(SRC, path).split('\\').join('/'), text: readFileSync(path, 'utf8') }));
const folderOf = (rel: string) => (rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : '');
const importsOf = (text: string) => ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);

test('the layers import only downward (domain/ from domain/ alone; no transport from another)', () => {
  const broken: string[] = [];
  for (const f of files) {
    const from = folderOf(f.rel);
    for (const spec of importsOf(f.text)) {
      if (!spec.startsWith('.')) continue;
      const target = posix.normalize(posix.join(posix.dirname(f.rel), spec));
      const to = folderOf(target);
      if (target.startsWith('..')) broken.push(`${f.rel} -> ${target} (outside src/)`);
      else if (from === 'domain' ? to !== 'domain' : FORBIDDEN[from]?.includes(to)) broken.push(`${f.rel} -> ${target}`);
    }
  }
  assert.deepEqual(broken.filter((e) => !ALLOWED_EDGES.has(e)), [], 'imports that run against the layering');
  const gone = [...ALLOWED_EDGES].filter((e) => !broken.includes(e));
  assert.deepEqual(gone, [], 'allowed edges that no longer exist: delete them from ALLOWED_EDGES');
});

test('the SMTP adapter imports nothing from derive/: ingest (services/ingest.ts) picks where a message is parsed', () => {
  const smtp = files.filter((f) => folderOf(f.rel) === 'smtp');
  assert.ok(smtp.some((f) => f.rel === 'smtp/data.ts'), 'the DATA phase is read');
  const fromDerive = smtp.flatMap((f) => importsOf(f.text)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => posix.normalize(posix.join(posix.dirname(f.rel), spec)))
    .filter((target) => folderOf(target) === 'derive')
    .map((target) => `${f.rel} -> ${target}`));
  assert.deepEqual(fromDerive, []);
});

test('no package is imported by a private path', () => {
  const privatePaths = files.flatMap((f) =>
    importsOf(f.text)
      .filter((spec) => !spec.startsWith('.') && !spec.startsWith('node:'))
      .filter((spec) => {
        const parts = spec.split('/');
        const sub = parts.slice(spec.startsWith('@') ? 2 : 1);
        return sub.length > 0 && /^(lib|dist|src|build|built|internal)$/.test(sub[0]);
      })
      .map((spec) => `${f.rel}: ${spec}`),
  );
  assert.deepEqual(privatePaths.filter((p) => !ALLOWED_PRIVATE_PATHS.has(p)), []);
});

test('no module-level mutable state: no top-level let or var, no top-level empty collection', () => {
  const found: string[] = [];
  for (const f of files) {
    const source = ts.createSourceFile(f.rel, f.text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue;
      const list = statement.declarationList;
      const isConst = (list.flags & ts.NodeFlags.Const) !== 0;
      for (const d of list.declarations) {
        const name = d.name.getText(source);
        const init = d.initializer;
        const emptyCollection = !!init && ((ts.isNewExpression(init) && /^(Map|Set|WeakMap|WeakSet)$/.test(init.expression.getText(source)) && !init.arguments?.length)
          || (ts.isArrayLiteralExpression(init) && init.elements.length === 0));
        if (!isConst || emptyCollection) found.push(`${f.rel}: ${name}`);
      }
    }
  }
  assert.deepEqual(found.filter((s) => !ALLOWED_STATE.has(s)), [], 'module-level mutable state (move it into what a factory returns)');
  const gone = [...ALLOWED_STATE].filter((s) => !found.includes(s));
  assert.deepEqual(gone, [], 'allowed state that no longer exists: delete it from ALLOWED_STATE');
});

test('the checks see the imports they are about (a file of each layer, a dynamic import)', () => {
  const rels = new Set(files.map((f) => f.rel));
  for (const rel of ['domain/ids.ts', 'services/webhooks.ts', 'smtp/server.ts', 'mcp/endpoint.ts', 'store/store.ts', 'assemble.ts']) assert.ok(rels.has(rel), rel);
  const assemble = files.find((f) => f.rel === 'assemble.ts')!;
  assert.ok(importsOf(assemble.text).includes('./assemble-redis.ts'), 'a dynamic import() is read');
});

test('no two files import each other, directly or around a circle', () => {
  const graph = new Map(files.map((f) => [f.rel, importsOf(f.text).filter((s) => s.startsWith('.')).map((s) => posix.normalize(posix.join(posix.dirname(f.rel), s)))]));
  const circles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') return void circles.push([...path.slice(path.indexOf(file)), file].join(' -> '));
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) visit(file, []);
  assert.deepEqual(circles, []);
});
