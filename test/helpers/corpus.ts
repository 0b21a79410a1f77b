// The shared real-world corpus lives outside this repository. One setting finds it:
// EPHEMAIL_CORPUS (default ../shared/corpus beside the checkout). Where it is absent, the tests that
// read it are skipped with this reason; scripts/test.mjs says so loudly in the final summary and
// fails under CI=true.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

export const CORPUS = resolve(root, process.env.EPHEMAIL_CORPUS || '../shared/corpus');

/** null when the corpus is there; otherwise why its tests are skipped (the `skip` option of node:test). */
export const corpusMissing: string | null = existsSync(join(CORPUS, 'MANIFEST.tsv'))
  ? null
  : `no shared corpus at ${CORPUS} (set EPHEMAIL_CORPUS to its directory)`;
