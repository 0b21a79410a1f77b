#!/usr/bin/env node
// The compiled form of src/: an esbuild bundle (packages stay external) that bin/ephemail.js runs
// instead of loading TypeScript through tsx at run time (start-up time and idle memory,
// bench/README.md "Start-up and idle").
//
// - `npm ci` builds it (the `prepare` script); bin/ephemail.js rebuilds it whenever the sources
//   changed (a content fingerprint of src/, tsconfig.json and this file), so nothing ever runs stale
//   code, and falls back to tsx if it cannot build.
// - Code splitting keeps the lazy imports lazy (the tool endpoint, the web pages, Redis): each
//   `import()` target is its own chunk, with its own imports of packages.
// - The worker threads (src/derive/worker.ts, src/store/sqlite/writer.ts) are built first, as entries
//   of their own; their file names are then defined into the main build as EPHEMAIL_WORKER_ENTRY and
//   EPHEMAIL_WRITER_ENTRY, which src/derive/pool.ts and src/store/sqlite/group-commit.ts start their
//   threads from (src/worker-entry.ts: beside the chunks of the main build).
// - Every output file is named by its content hash and written by rename, and the manifest naming
//   the main entry is written last, by rename: processes starting or building at the same time (a
//   test suite) never see a half-written file, and a running service still finds its own lazy
//   chunks after a rebuild. Files of older builds are removed after a week.
//
// Output: node_modules/.cache/ephemail/ (ignored by git, wiped by `npm ci`).
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const OUT_DIR = join(ROOT, 'node_modules', '.cache', 'ephemail');
const MANIFEST = join(OUT_DIR, 'manifest.json');
const ASSETS = join(ROOT, 'src', 'web', 'assets');
const KEEP_OLD_MS = 7 * 24 * 3600_000;

// A file that vanishes while it is read (an editor's temporary file) is left out, not an error.
const gone = (err) => err?.code === 'ENOENT';

function walk(dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    try {
      if (statSync(path).isDirectory()) walk(path, out);
      else out.push(path);
    } catch (err) {
      if (!gone(err)) throw err;
    }
  }
  return out;
}

/** A hash of every file the bundle is made from (names and contents): any edit changes it. */
export function fingerprint() {
  const h = createHash('sha256');
  for (const file of [...walk(join(ROOT, 'src'), []), join(ROOT, 'tsconfig.json'), fileURLToPath(import.meta.url)]) {
    let body;
    try {
      body = readFileSync(file);
    } catch (err) {
      if (gone(err)) continue;
      throw err;
    }
    h.update(relative(ROOT, file)).update('\0').update(body).update('\0');
  }
  return h.digest('hex');
}

function readManifest() {
  try {
    return JSON.parse(readFileSync(MANIFEST, 'utf8'));
  } catch {
    return null;
  }
}

/** Writes `data` to `path` atomically (a temporary file renamed over it). */
function writeAtomic(path, data) {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}

/** Builds the bundle; returns the main entry's path. */
export async function build() {
  const print = fingerprint(); // before reading the sources: an edit during the build makes the next start rebuild
  const esbuild = await import('esbuild');
  const common = {
    absWorkingDir: ROOT,
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outdir: OUT_DIR,
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    outExtension: { '.js': '.mjs' },
    write: false,
    metafile: true,
    logLevel: 'warning',
  };
  // the worker threads' entries: the derivation worker and the SQLite writer
  const workers = { 'derive-worker': 'src/derive/worker.ts', 'sqlite-writer': 'src/store/sqlite/writer.ts' };
  const workerBuild = await esbuild.build({ ...common, entryPoints: workers });
  const outOf = (entry) => {
    const out = Object.entries(workerBuild.metafile.outputs).find(([, o]) => o.entryPoint === entry)?.[0];
    if (!out) throw new Error(`build: no worker entry for ${entry}`);
    return JSON.stringify(`./${relative(OUT_DIR, join(ROOT, out))}`);
  };
  const mainBuild = await esbuild.build({
    ...common,
    entryPoints: { main: 'src/main.ts' },
    define: { EPHEMAIL_WORKER_ENTRY: outOf(workers['derive-worker']), EPHEMAIL_WRITER_ENTRY: outOf(workers['sqlite-writer']) },
  });
  // esbuild's service process would live on beside the service (~40 MB for nothing): ended here
  await esbuild.stop();
  const mainOut = Object.entries(mainBuild.metafile.outputs).find(([, o]) => o.entryPoint === 'src/main.ts')?.[0];
  if (!mainOut) throw new Error('build: no main entry');
  const result = { outputFiles: [...workerBuild.outputFiles, ...mainBuild.outputFiles] };

  mkdirSync(join(OUT_DIR, 'assets'), { recursive: true });
  const current = new Set(['manifest.json', 'assets']);
  for (const file of result.outputFiles) {
    current.add(relative(OUT_DIR, file.path));
    let same = false;
    try {
      same = statSync(file.path).size === file.contents.byteLength; // named by content hash: present means identical
    } catch {}
    if (!same) writeAtomic(file.path, file.contents);
  }
  // src/web/routes.ts reads ./assets/ next to itself
  for (const name of readdirSync(ASSETS)) writeAtomic(join(OUT_DIR, 'assets', name), readFileSync(join(ASSETS, name)));
  const main = join(ROOT, mainOut);
  writeAtomic(MANIFEST, JSON.stringify({ fingerprint: print, main: relative(OUT_DIR, main) }) + '\n');

  const now = Date.now();
  for (const name of readdirSync(OUT_DIR)) {
    if (current.has(name)) continue;
    const path = join(OUT_DIR, name);
    try {
      if (now - statSync(path).mtimeMs > KEEP_OLD_MS) rmSync(path, { force: true });
    } catch {}
  }
  return main;
}

/** The URL of the main entry of a bundle of the current sources, building it if missing or stale. */
export async function compiledEntry() {
  const manifest = readManifest();
  if (manifest && manifest.fingerprint === fingerprint()) return pathToFileURL(join(OUT_DIR, manifest.main)).href;
  return pathToFileURL(await build()).href;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  try {
    const main = await build();
    console.log(`ephemail: built ${relative(ROOT, main)} in ${Date.now() - started} ms`);
  } catch (err) {
    // `npm ci` must not fail for it: bin/ephemail.js tries again at start, else runs the sources through tsx
    console.error(`ephemail: the build failed (bin/ephemail.js will retry, else run the sources through tsx): ${err?.message ?? err}`);
    process.exitCode = process.argv.includes('--strict') ? 1 : 0;
  }
}
