#!/usr/bin/env node
// The `ephemail` command. Runs the compiled sources: an esbuild bundle of src/ (scripts/build.mjs),
// built by `npm ci` and rebuilt here whenever a file under src/ changed, so an edit is never run
// stale. If it cannot be built, or with EPHEMAIL_TSX=1, the TypeScript sources are loaded through
// tsx at run time instead (slower to start, more memory; bench/README.md "Start-up and idle").
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
