// The main thread's collections over an ingest run, counted from V8's --trace-gc (mark-compacts and
// scavenges, and their pause ms), for this checkout's build or another's: what a CPU profile's
// "(garbage collector)" share cannot tell apart. 500 messages of 50 KB HTML to warm up, then 6,000
// counted (package.json start's --max-semi-space-size=4, as npm start runs):
//   node --import tsx bench/gc-trace.ts [<checkout>/bin/ephemail.js]
// EXTRA_NODE_ARGS adds V8 flags to the service's (e.g. EXTRA_NODE_ARGS=--initial-old-space-size=40).
import { startService } from './lib.ts';
import { cases, loadOnce } from './smtp.ts';
const script = process.argv[2]; // default: this checkout's bin/ephemail.js
const svc = await startService({}, { script, nodeArgs: ['--trace-gc', '--max-semi-space-size=4', ...(process.env.EXTRA_NODE_ARGS?.split(' ').filter(Boolean) ?? [])] });
let text = '';
let on = false;
svc.child.stdout!.on('data', (d: Buffer) => {
  if (on) text += d.toString();
});
const c = cases(false).find((x) => x.message.name.includes('50 KB'))!;
await loadOnce(svc.smtpPort, { ...c, messages: 500 });
on = true;
const r = await loadOnce(svc.smtpPort, { ...c, messages: 6000 });
console.log(`${r.msgsPerSec.toFixed(0)} msgs/s; the main thread's collections meanwhile (and 3 s after):`);
await new Promise((res) => setTimeout(res, 3000));
on = false;
const stats: Record<string, { n: number; ms: number }> = {};
for (const m of text.matchAll(/ms: (Scavenge|Mark-Compact|Minor Mark-Compact|Mark-Compact \(reduce\))[^,]*,[^,]*?,? ([0-9.]+) \/ ([0-9.]+) ms[^;]*; *([^\n]*)/g)) {
  const k = `${m[1]} (${m[4].trim().slice(0, 40)})`;
  stats[k] ??= { n: 0, ms: 0 };
  stats[k].n++;
  stats[k].ms += Number(m[2]);
}
console.log(JSON.stringify(stats, null, 1));
svc.child.kill('SIGKILL');
process.exit(0);
