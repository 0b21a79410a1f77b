#!/usr/bin/env node
// The compiled form of src/: an esbuild bundle (packages stay external) in dist/, which
// bin/ephemail.js runs (start-up time and idle memory, bench/README.md "Start-up and idle"). Start
// never builds: the bundle is made ahead of time, and esbuild and tsx are dev dependencies only.
//
// - Who builds it: `npm ci` (the `prepare` script), `npm pack` / `npm publish` (`prepack`: the
//   tarball carries dist/ and no src/), `npm run build`, and `npm test` (scripts/test.mjs, before any
//   test, so a spawned service never runs stale code). Each builds only when dist/ is not the build
//   of the current sources (a content fingerprint of src/, tsconfig.json and this file);
//   `--force` builds anyway.
// - What start does (bin/ephemail.js): no dist/manifest.json (or its entry is gone) is one line
//   naming `npm run build` and exit 1; in a checkout (src/ beside it) a bundle of other sources is
//   one warning line naming `npm run build`, and it still runs. docs/operations.md "Build".
// - Code splitting keeps the lazy imports lazy (the tool endpoint, the web pages, Redis): each
//   `import()` target is its own chunk, with its own imports of packages.
// - The worker threads (src/derive/worker.ts, src/store/sqlite/writer.ts) are built first, as entries
//   of their own; their file names are then defined into the main build as EPHEMAIL_WORKER_ENTRY and
//   EPHEMAIL_WRITER_ENTRY, which src/derive/pool.ts and src/store/sqlite/group-commit.ts start their
//   threads from (src/worker-entry.ts: beside the chunks of the main build).
// - Every output file is named by its content hash and written by rename, and the manifest naming
//   the main entry is written last, by rename: processes starting or building at the same time (a
//   test suite) never see a half-written file, and a running service still finds its own lazy
//   chunks after a rebuild. Files of older builds are removed after a week; dist/.npmignore (written
//   with the manifest) keeps them out of `npm pack`.
//
// Output: dist/ (ignored by git, listed in package.json "files").
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const OUT_DIR = join(ROOT, 'dist');
const MANIFEST = join(OUT_DIR, 'manifest.json');
const ASSETS = join(ROOT, 'src', 'web', 'assets');
const MIGRATIONS = join(ROOT, 'src', 'store', 'sqlite', 'migrations');
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

/** dist/manifest.json: { fingerprint, main, files } of the last build; null if there is none. */
export function readManifest() {
  try {
    return JSON.parse(readFileSync(MANIFEST, 'utf8'));
  } catch {
    return null;
  }
}

/** Whether dist/ holds a build of the current sources, all of its files present. */
export function isCurrent(manifest = readManifest()) {
  if (!manifest || manifest.fingerprint !== fingerprint()) return false;
  const files = Array.isArray(manifest.files) ? manifest.files : [manifest.main];
  return files.every((f) => {
    try {
      return statSync(join(OUT_DIR, f)).isFile();
    } catch {
      return false;
    }
  });
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
  const current = new Set(['manifest.json', 'assets', 'migrations', '.npmignore']);
  for (const file of result.outputFiles) {
    current.add(relative(OUT_DIR, file.path));
    let same = false;
    try {
      same = statSync(file.path).size === file.contents.byteLength; // named by content hash: present means identical
    } catch {}
    if (!same) writeAtomic(file.path, file.contents);
    else utimesSync(file.path, new Date(), new Date()); // in use again: not an old build's file to remove after a week
  }
  // src/web/routes.ts reads ./assets/ next to itself
  for (const name of readdirSync(ASSETS)) writeAtomic(join(OUT_DIR, 'assets', name), readFileSync(join(ASSETS, name)));
  // src/store/sqlite/migrations.ts reads ./migrations/ next to itself
  mkdirSync(join(OUT_DIR, 'migrations'), { recursive: true });
  for (const name of readdirSync(MIGRATIONS)) writeAtomic(join(OUT_DIR, 'migrations', name), readFileSync(join(MIGRATIONS, name)));
  const main = join(ROOT, mainOut);
  const files = [...current].filter((f) => !['manifest.json', 'assets', 'migrations', '.npmignore'].includes(f)).sort();
  // `npm pack` takes this build only (package.json "files" lists dist/; a .npmignore below the root
  // still applies): not the older builds kept for services still running them
  const npmignore = ['# written by scripts/build.mjs: npm pack takes the current build only', '/*', '!/manifest.json', '!/assets/', '!/migrations/', ...files.map((f) => `!/${f}`)];
  writeAtomic(join(OUT_DIR, '.npmignore'), npmignore.join('\n') + '\n');
  writeAtomic(MANIFEST, JSON.stringify({ fingerprint: print, main: relative(OUT_DIR, main), files }) + '\n');

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
  if (isCurrent(manifest)) return pathToFileURL(join(OUT_DIR, manifest.main)).href;
  return pathToFileURL(await build()).href;
}

// `node scripts/build.mjs [--force] [--prepare]` (npm run build, prepack, prepare): builds unless
// dist/ is current; a failed build is exit status 1. --prepare (`npm ci`): without esbuild (a
// production install, `npm ci --omit=dev`) one line says so and the install goes on: the start will
// then say that dist/ is missing.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const args = process.argv.slice(2);
  try {
    if (!args.includes('--force') && isCurrent()) {
      console.log(`ephemail: ${relative(ROOT, OUT_DIR)}/ is the build of the current sources`);
    } else {
      const main = await build();
      console.log(`ephemail: built ${relative(ROOT, main)} in ${Date.now() - started} ms`);
    }
  } catch (err) {
    if (args.includes('--prepare') && err?.code === 'ERR_MODULE_NOT_FOUND' && /'esbuild'/.test(err?.message ?? '')) {
      console.error('ephemail: esbuild (a dev dependency) is not installed, so dist/ was not built: `npm ci` with dev dependencies then `npm run build`, or install the published package, which carries dist/');
    } else {
      console.error(`ephemail: the build failed: ${err?.message ?? err}`);
      process.exitCode = 1;
    }
  }
}
