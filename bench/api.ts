// Benchmark 2: API reads with autocannon, with an API key: GET /api/v1/inboxes/{address}/emails
// (25 of 1,000 stored) and GET /api/v1/emails/{id} cycling over every stored email (1,000 distinct
// ids, as a user's reads are: one id read again and again would measure a cache), and the first
// (cold) reads of emails never read before; in the same run, a bare Fastify route answering the same
// JSON bytes (bench/bare-fastify.ts) as the ceiling. Prints req/s, p99 and the ratio.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { cpuMsOf, createKey, fmt, freePort, machineLine, parseArgs, rssOf, sleep, spread, startServices, storeLabel, ROOT, type BenchOptions, type ServiceProcess, type Spread } from './lib.ts';
import { runLoad, textMessage } from './smtp-load.ts';

const CONNECTIONS = 20;
/** wrk's connections (the issue's measurement: `wrk -t1 -c10`); spread over nodes as CONNECTIONS is. */
const WRK_CONNECTIONS = 10;

type Cannon = { rps: number; p99: number; errors: number; non2xx: number };

/**
 * wrk (Debian's package), when installed: a load generator in C on one thread. autocannon is
 * JavaScript and takes about a core of its own on this 2-core machine, so with it the ceiling is
 * partly the generator's; wrk leaves the service the CPU the ratio is about.
 */
export const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p)) ?? null;

/** One wrk run (one thread): req/s, p99 in ms, socket errors and non-2xx answers. `paths`: requests cycle over them (a Lua script). */
function wrk(url: string, headers: Record<string, string>, seconds: number, connections: number, paths?: string[]): Promise<Cannon> {
  const args = ['-t1', `-c${connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--latency'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  let dir: string | null = null;
  if (paths?.length) {
    dir = mkdtempSync(join(tmpdir(), 'ephemail-wrk-'));
    const lua = join(dir, 'cycle.lua');
    writeFileSync(lua, `local paths = {${paths.map((p) => JSON.stringify(p)).join(',')}}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format("GET", paths[i])\nend\n`);
    args.push('-s', lua);
  }
  return new Promise<Cannon>((resolve, reject) => {
    execFile(WRK!, [...args, url], (err, out) => {
      if (err) return reject(err);
      const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
      const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(out);
      const p99ms = p99 ? Number(p99[1]) * (p99[2] === 'us' ? 0.001 : p99[2] === 's' ? 1000 : 1) : NaN;
      const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      const errors = sock ? sock.slice(1).reduce((a, x) => a + Number(x), 0) : 0;
      const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
      if (!Number.isFinite(rps)) return reject(new Error(`wrk printed no rate: ${out}`));
      resolve({ rps, p99: p99ms, errors, non2xx });
    });
  }).finally(() => dir && rmSync(dir, { recursive: true, force: true }));
}

/**
 * One run of `seconds` against `url` with `connections` connections: wrk when installed (and the run
 * is not --quick), else autocannon. `paths`: the requests cycle over these paths of `url`'s origin.
 */
export function cannon(url: string, headers: Record<string, string>, seconds: number, connections = CONNECTIONS, paths?: string[]): Promise<Cannon> {
  if (WRK && seconds >= 1) return wrk(url, headers, seconds, Math.max(1, Math.round((connections * WRK_CONNECTIONS) / CONNECTIONS)), paths);
  let i = 0;
  const requests = paths?.length ? [{ setupRequest: (req: { path: string }) => ({ ...req, path: paths[i++ % paths.length] }) }] : undefined;
  return new Promise((resolve, reject) => {
    autocannon({ url, headers, connections, pipelining: 1, duration: seconds, ...(requests ? { requests } : {}) } as never, (err, r) => {
      if (err) return reject(err);
      resolve({ rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx });
    });
  });
}

/**
 * Several nodes: the CONNECTIONS spread round-robin over `urls` (one autocannon per node, run
 * together); req/s and errors are summed, p99 is the highest of the nodes' p99s.
 */
async function cannonMany(urls: string[], headers: Record<string, string>, seconds: number, paths?: string[]): Promise<Cannon> {
  const rs = await Promise.all(
    urls.map((url, i) => cannon(url, headers, seconds, Math.floor(CONNECTIONS / urls.length) + (i < CONNECTIONS % urls.length ? 1 : 0), paths)),
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
  // the newest email's verdicts (computed in the background, oldest first): the reads are measured
  // once the service is done with the mail just stored, not while it still checks it
  for (let i = 0; i < 600; i++) {
    const e = (await (await fetch(`${svc.http}/api/v1/emails/${list.data[0].id}`, { headers })).json()) as { data: { authentication?: unknown } };
    if (e.data.authentication !== null) break; // computed (or a build without verdicts)
    await sleep(100); // poll: the verdicts of 1,000 messages take seconds
  }
  // every stored id (paged), for reads that cycle over them as a user's do
  const ids: string[] = [];
  for (let before = ''; ;) {
    const page = (await (await fetch(`${svc.http}/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100${before && `&before=${before}`}`, { headers })).json()) as { data: { id: string }[] };
    if (page.data.length === 0) break;
    ids.push(...page.data.map((e) => e.id));
    before = page.data.at(-1)!.id;
  }
  return { headers, listPath, list, ids, getPath: `/api/v1/emails/${list.data[12].id}`, getPaths: ids.map((id) => `/api/v1/emails/${id}`) };
}

/** First reads of emails never read (their views derived then): ms each, one at a time. */
async function coldReads(base: string, headers: Record<string, string>, paths: string[]): Promise<number[]> {
  const ms: number[] = [];
  for (const p of paths) {
    const t0 = performance.now();
    const res = await fetch(base + p, { headers });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`cold read ${p}: ${res.status}`);
    ms.push(performance.now() - t0);
  }
  return ms;
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
    pid: child.pid!,
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
  /** Process CPU (user + system) per request, in µs: the service's nodes and the bare processes. */
  cpuUs: Spread;
  bareCpuUs: Spread;
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
    const { headers, listPath, list, getPath, getPaths } = await seedReads(svc, stored, nodes.map((n) => n.smtpPort));
    // the first reads of emails not read before (the seeding read only the newest): derived on the spot
    const cold = spread(await coldReads(svc.http, headers, getPaths.slice(-Math.min(20, getPaths.length))));
    log(`  first (cold) read of a 5 KB email: ${fmt(cold)} ms (median (min–max) of ${Math.min(20, getPaths.length)}, one at a time)`);
    // then every email once (10 at a time), as the shared api-compare.sh's warm-up does: the measured
    // reads cycle over emails read once before, none read again and again
    let next = 0;
    await Promise.all(Array.from({ length: 10 }, async () => {
      while (next < getPaths.length) await (await fetch(svc.http + getPaths[next++], { headers })).arrayBuffer();
    }));
    const got = await (await fetch(svc.http + getPath, { headers })).json();
    const bodies = { '/bare/list': list, '/bare/get': got };
    // as many bare processes as nodes: the ceiling has the same process shape
    const bares: Awaited<ReturnType<typeof startBare>>[] = [];
    for (const n of nodes) bares.push(await startBare(bodies, n.dir));
    try {
      const cases: { name: string; path: string; barePath: string; paths?: string[] }[] = [
        { name: `list (25 of ${stored})`, path: listPath, barePath: '/bare/list' },
        { name: `get email (5 KB), ${getPaths.length} ids`, path: getPath, barePath: '/bare/get', paths: getPaths },
      ];
      for (const c of cases) {
        if (!opts.quick) {
          await cannonMany(nodes.map((n) => n.http + c.path), headers, 1, c.paths); // warm-up
          await cannonMany(bares.map((b) => b.base + c.barePath), {}, 1);
        }
        const mine: Awaited<ReturnType<typeof cannon>>[] = [];
        const ceil: Awaited<ReturnType<typeof cannon>>[] = [];
        const cpu: number[] = [];
        const bareCpu: number[] = [];
        /** A run, and its processes' CPU per request (from /proc: whatever else the machine runs cancels out). */
        const measured = async (pids: number[], run: () => Promise<Cannon>, into: Cannon[], cpuInto: number[]) => {
          const before = pids.reduce((a, p) => a + cpuMsOf(p), 0);
          const r = await run();
          const ms = pids.reduce((a, p) => a + cpuMsOf(p), 0) - before;
          into.push(r);
          cpuInto.push((ms * 1000) / Math.max(1, r.rps * seconds));
        };
        for (let i = 0; i < opts.runs; i++) {
          await measured(bares.map((b) => b.pid), () => cannonMany(bares.map((b) => b.base + c.barePath), {}, seconds), ceil, bareCpu);
          await measured(nodes.map((n) => n.pid), () => cannonMany(nodes.map((n) => n.http + c.path), headers, seconds, c.paths), mine, cpu);
        }
        const r: ApiResult = {
          name: c.name,
          rps: spread(mine.map((x) => x.rps)),
          p99: spread(mine.map((x) => x.p99)),
          bareRps: spread(ceil.map((x) => x.rps)),
          bareP99: spread(ceil.map((x) => x.p99)),
          cpuUs: spread(cpu),
          bareCpuUs: spread(bareCpu),
          ratio: 0,
          errors: mine.reduce((a, x) => a + x.errors + x.non2xx, 0),
        };
        r.ratio = r.rps.median / r.bareRps.median;
        out.push(r);
        log(`  ${r.name.padEnd(20)} ${fmt(r.rps)} req/s  p99 ${fmt(r.p99)} ms  | bare Fastify ${fmt(r.bareRps)} req/s p99 ${fmt(r.bareP99)} ms → ${(r.ratio * 100).toFixed(0)}% of bare  errors/non-2xx ${r.errors}`);
        log(`  ${''.padEnd(20)} CPU per request ${fmt(r.cpuUs)} µs | bare ${fmt(r.bareCpuUs)} µs → bare/this ${(r.bareCpuUs.median / r.cpuUs.median).toFixed(2)}`);
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
  console.log(`# API reads (${storeLabel(opts)}), ${WRK && !opts.quick ? `wrk -t1 ${WRK_CONNECTIONS}` : `autocannon ${CONNECTIONS}`} connections, ${opts.runs} run(s) — ${machineLine()}`);
  await benchApi(opts);
}
