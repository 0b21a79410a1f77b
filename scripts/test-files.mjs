#!/usr/bin/env node
// Runs test files with node's test runner in the order given (scripts/test.mjs puts the longest
// first): `node --import tsx scripts/test-files.mjs <concurrency> <file>...`. `node --test <files>`
// sorts its files by name; run() keeps the order it is given. Each file runs in a process of its own
// (started with this process's --import tsx), `concurrency` at a time, reported by the spec reporter;
// the exit status is 1 when a test failed.
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

const [concurrency, ...files] = process.argv.slice(2);
const stream = run({ files, concurrency: Number(concurrency), isolation: 'process' });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);
