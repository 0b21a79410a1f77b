// Runs one load against a service started with --cpu-prof and prints the top self-time functions
// (the profiles behind the figures in bench/README.md). Usage:
//   node --import tsx bench/profile.ts [text|html|attachment|realistic] [messages]   SMTP ingest
//   node --import tsx bench/profile.ts api [list|get] [seconds]             API reads with a key (as bench/api.ts)
// BENCH_SCRIPT=<another checkout>/bin/ephemail.js profiles that build instead (a worktree of an older
// commit, to compare where the time goes); PROF_DIR keeps the profiles there.
import { readdirSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, seedReads } from './api.ts';
import { startService } from './lib.ts';
import { realisticMessage } from './messages.ts';
import { messageOf, runLoad } from './smtp-load.ts';
import { cases } from './smtp.ts';

const kind = process.argv[2] ?? 'text';
const dir = process.env.PROF_DIR ?? mkdtempSync(join(tmpdir(), 'ephemail-prof-'));
const svc = await startService({}, { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`], script: process.env.BENCH_SCRIPT });
if (kind === 'api') {
  const what = process.argv[3] ?? 'get';
  const seconds = Number(process.argv[4] ?? 10);
  const { headers, listPath, getPath } = await seedReads(svc, 1000);
  const r = await cannon(svc.http + (what === 'list' ? listPath : getPath), headers, seconds);
  console.log(`api ${what} (1000 stored): ${r.rps.toFixed(0)} req/s under the profiler, non-2xx ${r.non2xx}`);
} else {
  const realistic = { message: messageOf('5 KB realistic (DKIM-signed)', realisticMessage().toString('latin1')), messages: 15_000 };
  const c = kind === 'realistic' ? realistic : cases(false).find((x) => x.message.name.toLowerCase().includes(kind))!;
  const n = Number(process.argv[3] ?? c.messages);
  const r = await runLoad({ port: svc.smtpPort, connections: 20, messages: n, message: c.message, rcpt: (i) => `user${i % 500}@ephemail.test` });
  console.log(`${c.message.name}: ${r.msgsPerSec.toFixed(0)} msgs/s under the profiler (ok ${r.ok}, failed ${r.failed})`);
}
await svc.stop();

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
for (const f of readdirSync(dir).filter((x) => x.endsWith('.cpuprofile'))) {
  const p = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  for (const node of p.nodes) {
    const t = self.get(node.id) ?? 0;
    if (!t) continue;
    const url = node.callFrame.url.replace(/^file:\/\//, '');
    const key = `${node.callFrame.functionName || '(anon)'} ${url.split('/').slice(-2).join('/')}:${node.callFrame.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + t);
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1] ?? (url.includes('/src/') ? 'src/' + url.split('/src/')[1].split('/')[0] : url ? 'node:' + url.split('/').pop() : node.callFrame.functionName || '(native)');
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + t);
  }
  const top = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([name, t]) => `    ${((t / total) * 100).toFixed(1).padStart(5)}%  ${name}`).join('\n');
  console.log(`  ${f} (${(total / 1000).toFixed(0)} ms sampled)\n  by package:\n${top(byPkg, 15)}\n  by function (self):\n${top(byFn, 25)}`);
}
console.log(`profiles in ${dir}`);
