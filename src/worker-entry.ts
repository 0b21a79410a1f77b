// Where a worker thread's code is. Built (npm start: the bundle), scripts/build.mjs builds each worker
// as an entry of its own and defines its file name into the main build, beside this chunk. Running
// the TypeScript sources (tests, EPHEMAIL_TSX=1), it is the source file, loaded through tsx, unless
// EPHEMAIL_TEST_BUILT_WORKERS names a build directory: `npm test` (scripts/test.mjs) sets it once
// dist/ is the build of the current sources, so the workers of the services a test starts in its
// own process run the built worker files (what npm start runs), not the sources through tsx, which
// costs each worker ~3× the CPU to start.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** `name`: the worker's entry name in the build (dist/<name>-<hash>.mjs): derive-worker, sqlite-writer. */
export function workerEntry(built: string | undefined, source: URL, name: string): { url: URL; execArgv?: string[] } {
  if (built !== undefined) return { url: new URL(built, import.meta.url) };
  const dir = process.env.EPHEMAIL_TEST_BUILT_WORKERS;
  if (dir) {
    const files = (JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { files?: string[] }).files ?? [];
    const file = files.find((f) => f.startsWith(`${name}-`) && f.endsWith('.mjs'));
    if (file) return { url: pathToFileURL(join(dir, file)), execArgv: [] };
  }
  if (process.execArgv.some((a) => a.includes('tsx'))) return { url: source }; // inherited
  return { url: source, execArgv: [...process.execArgv, '--import', import.meta.resolve('tsx/esm')] };
}
