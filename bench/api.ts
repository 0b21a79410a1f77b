// Benchmark 2: API reads with autocannon, with an API key: GET /api/v1/inboxes/{address}/emails
// (25 of 1,000 stored) and GET /api/v1/emails/{id}; in the same run, a bare Fastify route answering
// the same JSON bytes (bench/bare-fastify.ts) as the ceiling. Prints req/s, p99 and the ratio.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { createKey, fmt, freePort, machineLine, parseArgs, rssOf, sleep, spread, startServices, storeLabel, ROOT, type BenchOptions, type ServiceProcess, type Spread } from './lib.ts';
import { runLoad, textMessage } from './smtp-load.ts';

const CONNECTIONS = 20;

type Cannon = { rps: number; p99: number; errors: number; non2xx: number };

/** One autocannon run of `seconds` against `url` with `connections` connections. */
export function cannon(url: string, headers: Record<string, string>, seconds: number, connections = CONNECTIONS): Promise<Cannon> {
  return new Promise((resolve, reject) => {
    autocannon({ url, headers, connections, pipelining: 1, duration: seconds }, (err, r) => {
      if (err) return reject(err);
      resolve({ rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx });
    });
  });
}

/**
 * Several nodes: the CONNECTIONS spread round-robin over `urls` (one autocannon per node, run
 * together); req/s and errors are summed, p99 is the highest of the nodes' p99s.
 */
async function cannonMany(urls: string[], headers: Record<string, string>, seconds: number): Promise<Cannon> {
  const rs = await Promise.all(
    urls.map((url, i) => cannon(url, headers, seconds, Math.floor(CONNECTIONS / urls.length) + (i < CONNECTIONS % urls.length ? 1 : 0))),
  );
  return rs.reduce((a, r) => ({ rps: a.rps + r.rps, p99: Math.max(a.p99, r.p99), errors: a.errors + r.errors, non2xx: a.non2xx + r.non2xx }));
}

/**
 * What the read benchmarks read: an API key, `stored` 5 KB emails in one inbox (sent through
 * `smtpPorts`, round-robin), the list path (25 newest) and the path of one email of that page.
 */
export async function seedReads(svc: ServiceProcess, stored: number, smtpPorts = [svc.smtpPort]) {
  const key = await createKey(svc.http);
  const address = `reader${Date.now()}@ephemail.test`;
  const fill = await runLoad({ port: smtpPorts[0], ports: smtpPorts, connections: 10, messages: stored, message: textMessage(5), rcpt: () => address });
  if (fill.ok !== stored) throw new Error(`stored ${fill.ok} of ${stored}: ${fill.firstError}`);
  const headers = { authorization: `Bearer ${key}` };
  const listPath = `/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=25`;
  const list = (await (await fetch(svc.http + listPath, { headers })).json()) as { data: { id: string }[] };
  if (list.data.length !== 25) throw new Error(`list returned ${list.data.length}`);
  return { headers, listPath, list, getPath: `/api/v1/emails/${list.data[12].id}` };
}

async function startBare(bodies: Record<string, unknown>, dir: string) {
  const file = join(dir, 'bare-bodies.json');
  writeFileSync(file, JSON.stringify(bodies));
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, 'bench', 'bare-fastify.mjs')], {
    cwd: ROOT,
    env: { ...process.env, BARE_PORT: String(port), BARE_BODIES: file },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(base + Object.keys(bodies)[0])).ok) break;
    } catch {
      // not yet
    }
    await sleep(20);
  }
  return {
    base,
    stop: () => new Promise<void>((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    }),
  };
}

export interface ApiResult {
  name: string;
  rps: Spread;
  p99: Spread;
  bareRps: Spread;
  bareP99: Spread;
  ratio: number;
  errors: number;
}

/** `shared`: a running service to use (and leave running) instead of starting one. */
export async function benchApi(opts: BenchOptions, log: (s: string) => void = console.log, shared?: ServiceProcess): Promise<ApiResult[]> {
  const stored = opts.quick ? 30 : 1000;
  const seconds = opts.quick ? 0.3 : 5;
  const set = shared ? null : await startServices(opts);
  const nodes = set ? set.nodes : [shared!];
  const svc = nodes[0];
  const out: ApiResult[] = [];
  try {
    const { headers, listPath, list, getPath } = await seedReads(svc, stored, nodes.map((n) => n.smtpPort));
    const got = await (await fetch(svc.http + getPath, { headers })).json();
    const bodies = { '/bare/list': list, '/bare/get': got };
    // as many bare processes as nodes: the ceiling has the same process shape
    const bares = [];
    for (const n of nodes) bares.push(await startBare(bodies, n.dir));
    try {
      const cases = [
        { name: `list (25 of ${stored})`, path: listPath, barePath: '/bare/list' },
        { name: 'get email (5 KB)', path: getPath, barePath: '/bare/get' },
      ];
      for (const c of cases) {
        if (!opts.quick) {
          await cannonMany(nodes.map((n) => n.http + c.path), headers, 1); // warm-up
          await cannonMany(bares.map((b) => b.base + c.barePath), {}, 1);
        }
        const mine: Awaited<ReturnType<typeof cannon>>[] = [];
        const ceil: Awaited<ReturnType<typeof cannon>>[] = [];
        for (let i = 0; i < opts.runs; i++) {
          ceil.push(await cannonMany(bares.map((b) => b.base + c.barePath), {}, seconds));
          mine.push(await cannonMany(nodes.map((n) => n.http + c.path), headers, seconds));
        }
        const r: ApiResult = {
          name: c.name,
          rps: spread(mine.map((x) => x.rps)),
          p99: spread(mine.map((x) => x.p99)),
          bareRps: spread(ceil.map((x) => x.rps)),
          bareP99: spread(ceil.map((x) => x.p99)),
          ratio: 0,
          errors: mine.reduce((a, x) => a + x.errors + x.non2xx, 0),
        };
        r.ratio = r.rps.median / r.bareRps.median;
        out.push(r);
        log(`  ${r.name.padEnd(20)} ${fmt(r.rps)} req/s  p99 ${fmt(r.p99)} ms  | bare Fastify ${fmt(r.bareRps)} req/s p99 ${fmt(r.bareP99)} ms → ${(r.ratio * 100).toFixed(0)}% of bare  errors/non-2xx ${r.errors}`);
      }
      log(`  service peak RSS ${nodes.map((n) => rssOf(n.pid).peakMb.toFixed(0)).join(' / ')} MB${nodes.length > 1 ? ` (${nodes.length} nodes; bare: ${bares.length} processes)` : ''}`);
    } finally {
      await Promise.all(bares.map((b) => b.stop()));
    }
  } finally {
    await set?.stop();
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# API reads (${storeLabel(opts)}), autocannon ${CONNECTIONS} connections, ${opts.runs} run(s) — ${machineLine()}`);
  await benchApi(opts);
}
