// `npm run bench [-- --quick] [-- --runs=N] [-- --store redis [--nodes 3] [--redis=URL]] [-- ingest api longpoll startup]`: runs the benchmarks
// one after another (each starts its own service) and prints their figures. Not part of `npm test`
// (test/bench/bench-smoke.test.ts runs the --quick mode).
import { benchApi } from './api.ts';
import { machineLine, parseArgs, storeLabel } from './lib.ts';
import { benchLongPoll } from './longpoll.ts';
import { benchPush } from './push.ts';
import { benchIngest } from './smtp.ts';
import { benchStartup } from './startup.ts';

const args = process.argv.slice(2);
const opts = parseArgs(args);
const all = ['ingest', 'api', 'longpoll', 'startup', 'push'];
const picked = opts.only.length ? opts.only : all;
const unknown = picked.filter((p) => !all.includes(p));
if (unknown.length) {
  console.error(`unknown benchmark ${unknown.join(', ')}; pick from ${all.join(', ')}`);
  process.exit(2);
}
console.log(`# ephemail benchmarks (${storeLabel(opts)})${opts.quick ? ' (quick: tiny sizes, not figures)' : ''} — ${machineLine()}; ${opts.runs} run(s) each, median (min–max)`);
const started = performance.now();
if (picked.includes('ingest')) {
  console.log('## 1. SMTP ingest, end to end (250 = committed)');
  await benchIngest(opts);
}
if (picked.includes('api')) {
  console.log('## 2. API reads');
  await benchApi(opts);
}
if (picked.includes('longpoll')) {
  console.log('## 3. Long-poll fan-out');
  await benchLongPoll(opts);
}
if (picked.includes('startup') && opts.store === 'redis') console.log('## 4. Start-up and idle: skipped with --store redis (measured with SQLite)');
else if (picked.includes('startup')) {
  console.log('## 4. Start-up and idle');
  await benchStartup({ ...opts, compiled: args.includes('--compiled') });
}
if (picked.includes('push')) {
  console.log('## 5. Push: webhooks and event streams');
  await benchPush(opts);
}
console.log(`# done in ${((performance.now() - started) / 1000).toFixed(1)} s — load now ${machineLine().split('load ')[1]}`);
