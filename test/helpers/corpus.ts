// The real-world corpus of 222 messages, vendored under test/fixtures/corpus (its README.md names
// each file's source and licence; MANIFEST.tsv lists them). EPHEMAIL_CORPUS may name another copy;
// were that one absent, the tests that read it would be skipped with this reason, and
// scripts/test.mjs would say so loudly and fail under CI=true.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

export const CORPUS = resolve(root, process.env.EPHEMAIL_CORPUS || 'test/fixtures/corpus');

/** null when the corpus is there; otherwise why its tests are skipped (the `skip` option of node:test). */
export const corpusMissing: string | null = existsSync(join(CORPUS, 'MANIFEST.tsv'))
  ? null
  : `no corpus at ${CORPUS} (set EPHEMAIL_CORPUS to its directory)`;
