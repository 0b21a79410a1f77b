// Where a worker thread's code is. Built (npm start: the bundle), scripts/build.mjs builds each worker
// as an entry of its own and defines its file name into the main build, beside this chunk. Running
// the TypeScript sources (tests, EPHEMAIL_TSX=1), it is the source file, loaded through tsx.
export function workerEntry(built: string | undefined, source: URL): { url: URL; execArgv?: string[] } {
  if (built !== undefined) return { url: new URL(built, import.meta.url) };
  if (process.execArgv.some((a) => a.includes('tsx'))) return { url: source }; // inherited
  return { url: source, execArgv: [...process.execArgv, '--import', import.meta.resolve('tsx/esm')] };
}
