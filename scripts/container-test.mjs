#!/usr/bin/env node
// The container test: builds the image from the Dockerfile and runs it under podman, as docker
// would, then the two-node compose file. docs/container.md "What the test checks" lists the checks.
//
//   node scripts/container-test.mjs          (Node 22+; root on a fresh Debian 12 machine)
//
// - scripts/container-base.sh first: installs podman, runc, debootstrap and podman-compose if
//   missing, writes the containers.conf these machines need, and builds the local base image
//   (localhost/node:24-bookworm-slim) once; podman caches it and the image's layers between runs.
// - Every published port is bound to 127.0.0.1, and every request goes to 127.0.0.1.
// - Containers, volumes and networks it made are removed at the end, also on failure or Ctrl+C.
// - Exit code 0 when every check passed, 1 otherwise.
//
// Settings (environment):
//   BASE_IMAGE           default localhost/node:24-bookworm-slim; built by scripts/container-base.sh
//                        if podman lacks it (Node's major version taken from the tag)
//   EPHEMAIL_TEST_IMAGE  the tag built, default localhost/ephemail:latest (the short name `ephemail`
//                        of the docs' `docker run` line resolves to it)
//   CONTAINERS_CONF      default /tmp/ephemail-containers.conf
//   EPHEMAIL_TEST_KEEP=1 after a failure, leave the single-container steps' containers and volumes
//                        (listed at the end) for a look; compose is always taken down
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CONF = process.env.CONTAINERS_CONF || '/tmp/ephemail-containers.conf';
const BASE_IMAGE = process.env.BASE_IMAGE || 'localhost/node:24-bookworm-slim';
const IMAGE = process.env.EPHEMAIL_TEST_IMAGE || 'localhost/ephemail:latest';
const REDIS_IMAGE = 'localhost/ephemail-test-redis:7-bookworm';
const HOST_CA = '/etc/ssl/certs/ca-certificates.crt';
const RUN = `ephemail-ctest-${process.pid}`; // prefix of everything this run creates
const SIZE_LIMIT = 150e6;
const STOP_LIMIT_MS = 10_000;
const DOCS_BOX = `docs-${process.pid}@ephemail.test`;
const env = { ...process.env, CONTAINERS_CONF: CONF };
const started = Date.now();

// ---- output and bookkeeping -------------------------------------------------------------------

const failures = [];
let checks = 0;
const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const say = (line) => console.log(line);
function ok(name, detail) {
  checks++;
  say(`  ok    ${name}${detail ? `  (${detail})` : ''}`);
}
function fail(name, why) {
  checks++;
  failures.push(`${name}: ${why}`);
  say(`  FAIL  ${name}\n        ${String(why).split('\n').join('\n        ')}`);
}
class Fatal extends Error {}
// Ctrl+C (or SIGTERM): the running commands are stopped, no new check starts, and the normal end
// (cleanup in `finally`) runs; a second signal quits at once.
let interrupted = false;
const children = new Set();
/** Runs one check: `fn` returns a detail string (shown) or throws (a failure). */
async function check(name, fn) {
  if (interrupted) throw new Fatal('interrupted');
  try {
    ok(name, await fn());
    return true;
  } catch (err) {
    if (interrupted) throw new Fatal('interrupted');
    fail(name, err?.message ?? err);
    return false;
  }
}
function expect(cond, msg) {
  if (!cond) throw new Error(msg);
}

// podman prints these on every run of an image with a HEALTHCHECK: its health-check timer needs
// systemd, which these machines lack. Harmless; the test runs the check itself.
const NOISE = /unable to get systemd connection|Removing timer for container|failed to connect to syslog/;
const quiet = (text) => text.split('\n').filter((l) => l && !NOISE.test(l)).join('\n');

/** Runs a command; resolves {code, out, err} (never rejects unless it cannot start). */
function run(cmd, args, { input, timeoutMs = 600_000, extraEnv, cwd = ROOT, stream = false } = {}) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...env, ...extraEnv }, stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (stream) for (const line of quiet(String(d)).split('\n')) if (line) say(`        ${line}`);
    });
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolveRun({ code: code ?? (signal ? 128 : 1), out, err: quiet(err) });
    });
    child.stdin.end(input ?? '');
  });
}
const podman = (...args) => run('podman', args, { timeoutMs: 120_000 });
/** podman that must succeed; returns stdout trimmed. */
async function podmanOk(...args) {
  const r = await podman(...args);
  if (r.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${r.code}: ${(r.err || r.out).trim().slice(-800)}`);
  return r.out.trim();
}

// What to remove at the end, whatever happened.
const cleanup = { containers: new Set(), volumes: new Set(), composeProjects: new Set() };

async function removeEverything() {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  for (const project of cleanup.composeProjects) await composeDown(project).catch(() => undefined);
  if (process.env.EPHEMAIL_TEST_KEEP === '1' && failures.length) {
    say(`\nEPHEMAIL_TEST_KEEP=1: left in place: containers ${[...cleanup.containers].join(' ') || '-'}, volumes ${[...cleanup.volumes].join(' ') || '-'}`);
    return;
  }
  for (const name of cleanup.containers) await podman('rm', '-f', '-v', '-t', '0', name);
  for (const name of cleanup.volumes) {
    // a container still on the volume (the docs' line names none): removed with it
    for (const id of (await podman('ps', '-a', '-q', '--filter', `volume=${name}`)).out.split(/\s+/).filter(Boolean)) await podman('rm', '-f', '-v', '-t', '0', id);
    await podman('volume', 'rm', '-f', name);
  }
}

// ---- HTTP and SMTP against 127.0.0.1 ------------------------------------------------------------

async function http(port, path, { method = 'GET', headers = {}, body, timeoutMs = 10_000 } = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, json };
}

/** Waits until GET /livez answers 200 (the container may still be starting). */
async function waitLive(port, ms = 45_000) {
  const until = Date.now() + ms;
  let last = 'no answer';
  while (Date.now() < until) {
    try {
      const r = await http(port, '/livez', { timeoutMs: 2000 });
      if (r.status === 200) return;
      last = `HTTP ${r.status}`;
    } catch (err) {
      last = err?.cause?.code ?? err?.message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`/livez on 127.0.0.1:${port} did not answer 200 within ${secs(ms)} (last: ${last})`);
}

/** Waits until GET /api/v1/health says ok, store connected, SMTP running. */
async function waitHealthy(port, ms = 30_000) {
  const until = Date.now() + ms;
  let last = '';
  while (Date.now() < until) {
    try {
      const r = await http(port, '/api/v1/health', { timeoutMs: 2000 });
      last = `${r.status} ${r.text.slice(0, 200)}`;
      const d = r.json?.data;
      if (r.status === 200 && d?.status === 'ok' && d.database === 'connected' && d.smtp === 'running') return last;
    } catch (err) {
      last = err?.cause?.code ?? err?.message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`/api/v1/health on 127.0.0.1:${port} not ok within ${secs(ms)} (last: ${last})`);
}

/** Sends one message over a plain SMTP conversation; resolves with the final reply to DATA (and timings). */
function sendMail(port, to, subject, body = 'Sent by scripts/container-test.mjs.') {
  return new Promise((resolveSend, reject) => {
    const t0 = Date.now();
    const times = [];
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('connect', () => times.push(`connected ${Date.now() - t0} ms`));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`SMTP on 127.0.0.1:${port}: no answer within 45 s (at step ${step}; ${times.join(', ')})`));
    }, 45_000);
    const message = [
      'From: Container Test <sender@example.net>',
      `To: <${to}>`,
      `Subject: ${subject}`,
      `Message-ID: <${Date.now()}.${Math.random().toString(36).slice(2)}@container-test.invalid>`,
      `Date: ${new Date().toUTCString()}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      body,
      '.',
      '',
    ].join('\r\n');
    // each step: the reply code expected, then what to send next
    const steps = [
      [220, 'EHLO container-test.invalid'],
      [250, 'MAIL FROM:<sender@example.net>'],
      [250, `RCPT TO:<${to}>`],
      [250, 'DATA'],
      [354, message],
      [250, 'QUIT'],
    ];
    let step = 0;
    let buf = '';
    let finalReply = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buf += chunk;
      let m;
      // a complete reply: its last line is "NNN " (a space, not a dash)
      while ((m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\r?\n/.exec(buf))) {
        const reply = m[0];
        buf = buf.slice(reply.length);
        if (step >= steps.length) continue; // 221 to QUIT
        const [want, next] = steps[step];
        times.push(`${m[1]} ${Date.now() - t0} ms`);
        if (Number(m[1]) !== want) {
          clearTimeout(timer);
          socket.destroy();
          return reject(new Error(`SMTP on 127.0.0.1:${port}: expected ${want}, got ${reply.trim()}`));
        }
        if (want === 250 && next === 'QUIT') finalReply = reply.trim();
        socket.write(next.endsWith('\r\n') ? next : `${next}\r\n`);
        step++;
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`SMTP on 127.0.0.1:${port}: ${err.message}`));
    });
    socket.on('close', () => {
      clearTimeout(timer);
      if (finalReply) resolveSend(Object.assign(new String(finalReply), { times: times.join(', ') }));
      else reject(new Error(`SMTP on 127.0.0.1:${port}: connection closed at step ${step}`));
    });
  });
}

/** The inbox's list; waits up to `ms` for an email with `subject` to show up (ingest is async-ish). */
async function findListed(port, address, subject, ms = 10_000) {
  const until = Date.now() + ms;
  let last = '';
  while (Date.now() < until) {
    const r = await http(port, `/api/v1/inboxes/${encodeURIComponent(address)}/emails`);
    last = `${r.status} ${r.text.slice(0, 300)}`;
    const hit = r.json?.data?.find?.((e) => e.subject === subject);
    if (hit) return hit;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no email "${subject}" listed in ${address} on 127.0.0.1:${port} (last: ${last})`);
}

async function mintKey(port) {
  const r = await http(port, '/api/v1/keys', { method: 'POST', body: { label: 'container-test' } });
  const key = r.json?.data?.api_key;
  if (r.status !== 201 || !key) throw new Error(`POST /api/v1/keys: ${r.status} ${r.text.slice(0, 300)}`);
  return key;
}

/**
 * Starts a long-poll; resolves once the node reports it held (its metric) with `{ answer }`, the
 * promise of its response (wrapped: an async function returning a promise would wait for it).
 */
async function holdWait(port, key, address, waitS = 30, metricsPort = port) {
  const t0 = Date.now();
  const answer = http(port, `/api/v1/inboxes/${encodeURIComponent(address)}/emails?wait=${waitS}`, {
    headers: { authorization: `Bearer ${key}` },
    timeoutMs: (waitS + 15) * 1000,
  }).then((r) => ({ ...r, ms: Date.now() - t0 }));
  answer.catch(() => undefined);
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    const m = await http(metricsPort, '/metrics').catch(() => null);
    const held = Number(/^ephemail_waits_held (\d+)/m.exec(m?.text ?? '')?.[1] ?? NaN);
    if (held >= 1) return { answer };
    if (Number.isNaN(held)) {
      // no metrics (EPHEMAIL_METRICS=false): give the request a moment to be held
      await new Promise((r) => setTimeout(r, 1500));
      return { answer };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the long-poll on 127.0.0.1:${port} was not held within 10 s`);
}

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function hostPort(container, containerPort) {
  const out = await podmanOk('port', container, `${containerPort}/tcp`);
  const m = /127\.0\.0\.1:(\d+)/.exec(out);
  if (!m) throw new Error(`podman port ${container} ${containerPort}: ${out} (expected 127.0.0.1:<port>)`);
  return Number(m[1]);
}

/**
 * Every container this test starts asks no resolver of the host's: its resolver is its own loopback
 * (`--dns 127.0.0.1`, where nothing answers) and the sender checks ask a loopback port nothing
 * answers on (EPHEMAIL_DNS_SERVERS=127.0.0.1:1: temperror at once), as every service of the tests.
 */
const NO_DNS = ['--dns', '127.0.0.1', '-e', 'EPHEMAIL_DNS_SERVERS=127.0.0.1:1'];
/**
 * The same for compose's two nodes: an override file beside compose.yaml's own, written once. Their
 * resolver stays the compose network's own (it answers the service names, `redis`); the sender checks
 * ask the loopback port.
 */
const composeNoDns = () => {
  const file = join(mkdtempSync(join(tmpdir(), 'ephemail-compose-')), 'no-dns.yaml');
  const node = '    environment:\n      EPHEMAIL_DNS_SERVERS: 127.0.0.1:1\n';
  writeFileSync(file, `services:\n  ephemail-a:\n${node}  ephemail-b:\n${node}`);
  return file;
};
/**
 * Whether a running container has EPHEMAIL_DNS_SERVERS=127.0.0.1:1 and, unless it is on a compose
 * network (whose own DNS answers the service names), resolves through its own loopback only.
 */
async function expectNoHostDns(id, { network = false } = {}) {
  const env = await podmanOk('inspect', '--format', '{{range .Config.Env}}{{println .}}{{end}}', id);
  expect(/^EPHEMAIL_DNS_SERVERS=127\.0\.0\.1:1$/m.test(env), `${id}: EPHEMAIL_DNS_SERVERS is not 127.0.0.1:1`);
  if (network) return 'EPHEMAIL_DNS_SERVERS=127.0.0.1:1 (service names from the compose network)';
  const resolv = await podmanOk('exec', id, 'cat', '/etc/resolv.conf');
  const servers = [...resolv.matchAll(/^nameserver\s+(\S+)/gm)].map((m) => m[1]);
  expect(servers.length > 0 && servers.every((s) => s === '127.0.0.1'), `${id}: /etc/resolv.conf names ${servers.join(', ') || 'no server'}`);
  return `resolver ${servers.join(',')}, EPHEMAIL_DNS_SERVERS=127.0.0.1:1`;
}

/** Starts the image detached, ports published on 127.0.0.1 (the host picks them). */
async function startContainer(name, volume) {
  cleanup.containers.add(name);
  await podmanOk('run', '-d', ...NO_DNS, '--name', name, '-p', '127.0.0.1::8025', '-p', '127.0.0.1::1025', '-v', `${volume}:/data`, IMAGE);
  return { http: await hostPort(name, 8025), smtp: await hostPort(name, 1025) };
}

const exitCodeOf = async (name) => Number(await podmanOk('inspect', '--format', '{{.State.ExitCode}}', name));

// ---- compose --------------------------------------------------------------------------------------

const composeFiles = ['-f', join(ROOT, 'compose.yaml'), '-f', composeNoDns()];
let composeEnv = {};
const compose = (project, ...args) => run('podman-compose', ['-p', project, ...composeFiles, ...args], { extraEnv: composeEnv, timeoutMs: 300_000 });

async function composeDown(project) {
  // podman-compose 1.0.3 (Debian 12) leaves the anonymous volumes of the image's VOLUME /data and
  // the project's network behind on `down -v`; docker compose removes both. Remove them here.
  const ids = (await podman('ps', '-a', '-q', '--filter', `label=io.podman.compose.project=${project}`)).out.split(/\s+/).filter(Boolean);
  const anon = [];
  for (const id of ids) {
    const r = await podman('inspect', '--format', '{{range .Mounts}}{{.Type}}={{.Name}} {{end}}', id);
    for (const m of r.out.trim().split(/\s+/)) if (m.startsWith('volume=')) anon.push(m.slice(7));
  }
  const down = await compose(project, 'down', '-v');
  for (const v of anon) await podman('volume', 'rm', '-f', v);
  await podman('network', 'rm', '-f', `${project}_default`);
  cleanup.composeProjects.delete(project);
  return down;
}

/**
 * Runs a documented `docker run --rm …` line with podman, changing only: podman for docker; each
 * -p HOST:CONTAINER to a free 127.0.0.1 port (8025 and 1025 may be taken on a shared machine, and
 * the test publishes on loopback only); the named volume renamed so a real ephemail-data volume is
 * never touched; the image name only if the test built another tag than localhost/ephemail:latest
 * (`ephemail` is its short name, which podman resolves itself). In the foreground, as a user runs
 * it: a mail in and listed, then SIGTERM to podman, which passes it on (as Ctrl+C would).
 */
async function runDocsLine(line, n) {
  const words = line.split(/\s+/);
  const httpPort = await freePort();
  const smtpPort = await freePort();
  const docsVolume = `${RUN}-docs-data-${n}`;
  cleanup.volumes.add(docsVolume);
  const args = [];
  const seen = { http: false, smtp: false, volume: false, image: false };
  for (let i = 1; i < words.length; i++) {
    const w = words[i];
    if (w === '-p') {
      const [, target] = words[++i].split(/:(?=\d+$)/);
      if (target === '8025') (args.push('-p', `127.0.0.1:${httpPort}:8025`), (seen.http = true));
      else if (target === '1025') (args.push('-p', `127.0.0.1:${smtpPort}:1025`), (seen.smtp = true));
      else throw new Error(`unexpected -p ${words[i]}`);
    } else if (w === '-v') {
      const [vol, path] = words[++i].split(':');
      expect(path === '/data' && !vol.startsWith('/'), `unexpected -v ${words[i]}`);
      args.push('-v', `${docsVolume}:/data`);
      seen.volume = true;
    } else if (i === words.length - 1) {
      expect(w === 'ephemail', `the image is ${w}, expected ephemail`);
      args.push(IMAGE === 'localhost/ephemail:latest' ? w : IMAGE);
      seen.image = true;
    } else args.push(w);
  }
  expect(seen.http && seen.smtp && seen.volume && seen.image, `the line lacks ${Object.keys(seen).filter((k) => !seen[k]).join(', ')}: ${line}`);
  args.splice(1, 0, ...NO_DNS); // (after `run`: no lookup leaves the machine, as every container here)
  // foreground, as a user runs it: podman passes the SIGTERM sent to it on to the container
  const child = spawn('podman', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.on('close', () => children.delete(child));
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise((res) => child.on('close', (code, signal) => res({ code, signal })));
  try {
    await Promise.race([waitLive(httpPort), exited.then(({ code }) => { throw new Error(`podman exited ${code}: ${quiet(out).slice(-1500)}`); })]);
    await waitHealthy(httpPort);
    const subj = `docs line ${n} ${process.pid}`;
    await sendMail(smtpPort, DOCS_BOX, subj);
    await findListed(httpPort, DOCS_BOX, subj);
  } catch (err) {
    child.kill('SIGTERM');
    throw err;
  }
  const t0 = Date.now();
  child.kill('SIGTERM');
  const timeout = new Promise((res) => setTimeout(() => res({ code: 'timeout' }), 15_000));
  const { code } = await Promise.race([exited, timeout]);
  expect(code === 0, `podman run ended with ${code} after SIGTERM: ${quiet(out).slice(-1500)}`);
  const left = (await podman('ps', '-a', '-q', '--filter', `volume=${docsVolume}`)).out.trim();
  expect(!left, `--rm did not remove the container ${left}`);
  return `podman ${args.join(' ')}: mail in and listed; SIGTERM → exit 0 in ${secs(Date.now() - t0)}, container removed`;
}

// ---- the test ---------------------------------------------------------------------------------------

async function main() {
  say(`container test: image ${IMAGE} from ${ROOT}/Dockerfile, base ${BASE_IMAGE}, CONTAINERS_CONF=${CONF}`);

  // 1. podman and the base image -------------------------------------------------------------------
  say('\n[1/7] podman and the base image');
  {
    const t0 = Date.now();
    // installs what is missing, writes containers.conf, builds the base if podman lacks it
    const major = /node:(\d+)/.exec(BASE_IMAGE)?.[1] ?? '24';
    const extraEnv = { BASE_IMG: BASE_IMAGE, NODE_MAJOR: major, CONTAINERS_CONF: CONF };
    const r = await run('bash', [join(ROOT, 'scripts/container-base.sh')], { extraEnv, stream: true, timeoutMs: 900_000 });
    if (r.code !== 0) throw new Fatal(`scripts/container-base.sh exited ${r.code}:\n${r.err.slice(-2000)}`);
    ok('podman, runc, debootstrap and podman-compose installed; base image present', `${BASE_IMAGE}, ${secs(Date.now() - t0)}`);
  }

  // 2. build ---------------------------------------------------------------------------------------
  say('\n[2/7] build');
  {
    const t0 = Date.now();
    const previous = (await podman('image', 'inspect', '--format', '{{.Id}}', IMAGE)).out.trim();
    const args = ['build', '--format', 'docker', '--build-arg', `BASE_IMAGE=${BASE_IMAGE}`, '-t', IMAGE];
    if (existsSync(HOST_CA)) {
      // npm ci inside the build reaches the registry only with this machine's CA bundle: mounted
      // read-only for the build, never copied (checked below)
      args.push('-v', `${HOST_CA}:/run/host-ca/ca-certificates.crt:ro`, '--build-arg', 'NODE_EXTRA_CA_CERTS=/run/host-ca/ca-certificates.crt');
    }
    args.push(ROOT);
    const r = await run('podman', args, { timeoutMs: 900_000 });
    const cached = (r.out.match(/--> Using cache/g) ?? []).length;
    const steps = (r.out.match(/STEP \d+\/\d+/g) ?? []).length;
    if (r.code !== 0) throw new Fatal(`podman build exited ${r.code}:\n${(r.out + r.err).slice(-3000)}`);
    ok('podman build --format docker of the Dockerfile', `${secs(Date.now() - t0)}, ${cached} of ${steps} steps from cache`);
    // the image this build replaced, now untagged: removed, so that runs after source changes do not
    // pile up images (its layers still in use stay; podman refuses while a container uses it)
    const now = (await podman('image', 'inspect', '--format', '{{.Id}}', IMAGE)).out.trim();
    if (previous && previous !== now) await podman('rmi', previous);
  }
  {
    const t0 = Date.now();
    const dir = mkdtempSync(join(tmpdir(), 'ephemail-redis-'));
    // The stand-in for the official redis:7-bookworm that compose.yaml names (no registry here):
    // Debian's redis-server on the same base. Like the official image it runs in /data as user
    // redis, without protected mode (other containers connect), and takes `redis-server <args>`.
    writeFileSync(join(dir, 'Containerfile'), `ARG BASE_IMAGE
FROM \${BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
 && mkdir -p /data && chown redis:redis /data \\
 && printf '#!/bin/sh\\nif [ "$1" = redis-server ]; then shift; set -- redis-server --protected-mode no "$@"; fi\\nexec "$@"\\n' > /usr/local/bin/redis-entrypoint \\
 && chmod 755 /usr/local/bin/redis-entrypoint
WORKDIR /data
VOLUME /data
USER redis
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/redis-entrypoint"]
CMD ["redis-server"]
`);
    const r = await run('podman', ['build', '--format', 'docker', '--build-arg', `BASE_IMAGE=${BASE_IMAGE}`, '-t', REDIS_IMAGE, dir], { timeoutMs: 600_000 });
    rmSync(dir, { recursive: true, force: true });
    if (r.code !== 0) throw new Fatal(`building the Redis stand-in exited ${r.code}:\n${(r.out + r.err).slice(-3000)}`);
    ok('Redis stand-in image for compose (Debian redis-server on the base)', `${REDIS_IMAGE}, ${secs(Date.now() - t0)}`);
  }

  // 3. the image itself -------------------------------------------------------------------------------
  say('\n[3/7] the image');
  const [inspect] = JSON.parse(await podmanOk('image', 'inspect', IMAGE));
  const config = inspect.Config ?? {};
  await check('declares HEALTHCHECK on /livez without curl', () => {
    // podman shows it beside Config; docker inside it. An OCI-format build has none at all.
    const hc = inspect.Healthcheck ?? config.Healthcheck;
    const test = hc?.Test ?? [];
    expect(test.length > 0, 'no HEALTHCHECK in the image (built without --format docker?)');
    const cmd = test.join(' ');
    expect(cmd.includes('/livez') && !/\bcurl\b|\bwget\b/.test(cmd), `HEALTHCHECK ${cmd}`);
    return `${test[0]} ${test.slice(1, 3).join(' ')} …, every ${hc.Interval / 1e9} s`;
  });
  await check('declares EXPOSE 8025 1025', () => {
    const ports = Object.keys(config.ExposedPorts ?? {}).sort();
    expect(ports.includes('8025/tcp') && ports.includes('1025/tcp'), `ExposedPorts ${JSON.stringify(ports)}`);
    return ports.join(' ');
  });
  await check('declares VOLUME /data; EPHEMAIL_STORE=sqlite:/data/ephemail.db; listens on all interfaces', () => {
    expect(Object.keys(config.Volumes ?? {}).includes('/data'), `Volumes ${JSON.stringify(config.Volumes)}`);
    const e = Object.fromEntries((config.Env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    expect(e.EPHEMAIL_STORE === 'sqlite:/data/ephemail.db', `EPHEMAIL_STORE=${e.EPHEMAIL_STORE}`);
    expect(e.EPHEMAIL_HTTP_HOST === '0.0.0.0' && e.EPHEMAIL_SMTP_HOST === '0.0.0.0', `EPHEMAIL_HTTP_HOST=${e.EPHEMAIL_HTTP_HOST} EPHEMAIL_SMTP_HOST=${e.EPHEMAIL_SMTP_HOST}`);
    expect(!Object.keys(e).some((k) => k === 'NODE_EXTRA_CA_CERTS'), 'NODE_EXTRA_CA_CERTS is set in the runtime image');
    return `EPHEMAIL_HTTP_HOST=${e.EPHEMAIL_HTTP_HOST}:${e.EPHEMAIL_HTTP_PORT}, EPHEMAIL_SMTP_HOST=${e.EPHEMAIL_SMTP_HOST}:${e.EPHEMAIL_SMTP_PORT}`;
  });
  await check('runs as a non-root user, node as the command (no npm, no shell)', () => {
    expect(config.User && !['root', '0', '0:0'].includes(config.User), `USER ${JSON.stringify(config.User)}`);
    expect(config.Cmd?.[0] === 'node' && !config.Entrypoint?.length, `Entrypoint ${JSON.stringify(config.Entrypoint)} Cmd ${JSON.stringify(config.Cmd)}`);
    return `USER ${config.User}, CMD ${JSON.stringify(config.Cmd)}`;
  });
  await check('adds under 150 MB to its base', async () => {
    const [size, baseSize] = [await podmanOk('image', 'inspect', '--format', '{{.Size}}', IMAGE), await podmanOk('image', 'inspect', '--format', '{{.Size}}', BASE_IMAGE)].map(Number);
    const above = size - baseSize;
    const layers = (await podmanOk('history', '--format', '{{.Size}}\t{{.CreatedBy}}', IMAGE)).split('\n');
    const biggest = layers.filter((l) => !/imported from|ADD file/.test(l)).map((l) => l.split('\t')).filter(([s]) => /MB/.test(s)).map(([s, by]) => `${s} ${by.replace(/^\/bin\/sh -c (#\(nop\) )?/, '').slice(0, 60)}`);
    expect(above < SIZE_LIMIT, `${(above / 1e6).toFixed(1)} MB above the base (image ${(size / 1e6).toFixed(1)} MB, base ${(baseSize / 1e6).toFixed(1)} MB)`);
    return `${(above / 1e6).toFixed(1)} MB above the base: image ${(size / 1e6).toFixed(1)} MB, base ${(baseSize / 1e6).toFixed(1)} MB; largest layer: ${biggest.join('; ') || '-'}`;
  });
  await check('runtime stage: no compiler, no dev dependencies, no npm cache, no CA bundle, bundle current', async () => {
    const probe = `
      const fs = require('fs');
      const found = (p) => fs.existsSync(p);
      const bad = [];
      for (const c of ['gcc', 'cc', 'g++', 'c++', 'make', 'python3']) for (const d of ['/usr/bin', '/usr/local/bin']) if (found(d + '/' + c)) bad.push('compiler/tool ' + d + '/' + c);
      for (const d of ['typescript', '@playwright/test', 'playwright-core', 'fast-check', '@redocly/cli', 'autocannon', '@types/node', 'node-gyp']) if (found('/app/node_modules/' + d)) bad.push('dev dependency ' + d);
      for (const d of ['/root/.npm', '/home/node/.npm', '/run/host-ca', '/app/test', '/app/bench', '/app/.git']) if (found(d)) bad.push('present: ' + d);
      import('/app/scripts/build.mjs').then((b) => {
        const m = JSON.parse(fs.readFileSync(b.OUT_DIR + '/manifest.json', 'utf8'));
        if (m.fingerprint !== b.fingerprint()) bad.push('the bundle does not match src/: bin/ephemail.js would warn that it is stale');
        console.log(JSON.stringify(bad));
      });`;
    const out = await podmanOk('run', '--rm', '--no-healthcheck', '--network', 'none', IMAGE, 'node', '-e', probe);
    const bad = JSON.parse(out.split('\n').pop());
    expect(bad.length === 0, bad.join('; '));
    return 'bundle fingerprint matches src/';
  });

  // 4. one container on a named volume ------------------------------------------------------------------
  say('\n[4/7] one container (ports on 127.0.0.1, a named volume)');
  const volume = `${RUN}-data`;
  cleanup.volumes.add(volume);
  const box = `box-${process.pid}@ephemail.test`;
  const subject = `container test ${process.pid} ${Date.now()}`;
  let ports = await startContainer(`${RUN}-1`, volume);
  let mailId = null;
  {
    const t0 = Date.now();
    const live = await check('GET /livez answers', async () => {
      await waitLive(ports.http);
      return `127.0.0.1:${ports.http} → 8025, ${secs(Date.now() - t0)} after podman run`;
    });
    if (!live) throw new Fatal(`the container does not answer; its log:\n${(await podman('logs', `${RUN}-1`)).err.slice(-3000)}`);
    await check('GET /api/v1/health: ok, database connected, smtp running', () => waitHealthy(ports.http));
    await check("no lookup leaves the machine: the container's resolver is its own loopback, EPHEMAIL_DNS_SERVERS=127.0.0.1:1", () => expectNoHostDns(`${RUN}-1`));
    await check("the image's HEALTHCHECK passes (podman healthcheck run)", async () => {
      const r = await podman('healthcheck', 'run', `${RUN}-1`);
      expect(r.code === 0, `exit ${r.code}: ${(r.out + r.err).trim()}`);
      return (r.out.trim() || 'healthy').split('\n')[0];
    });
    await check('a mail sent over SMTP to the mapped port is listed by the API', async () => {
      const reply = await sendMail(ports.smtp, box, subject);
      const hit = await findListed(ports.http, box, subject);
      mailId = hit.id;
      return `SMTP 127.0.0.1:${ports.smtp} → 1025: "${reply.slice(0, 40)}…"; listed as ${hit.id}`;
    });
    await check('the pages answer: / and the inbox page', async () => {
      const home = await http(ports.http, '/');
      expect(home.status === 200 && home.type.startsWith('text/html'), `GET / → ${home.status} ${home.type}`);
      const inbox = await http(ports.http, `/inbox/${encodeURIComponent(box)}`);
      expect(inbox.status === 200 && inbox.text.includes(box), `GET /inbox/${box} → ${inbox.status}`);
      if (mailId) {
        const page = await http(ports.http, `/inbox/${encodeURIComponent(box)}/${mailId}`);
        expect(page.status === 200 && page.text.includes(subject), `GET /inbox/${box}/${mailId} → ${page.status}, subject ${page.text.includes(subject) ? '' : 'not '}shown`);
      }
      return `/ ${home.text.length} bytes of HTML; the inbox and the email's page too`;
    });
    await check('no process in the container runs as root; node is PID 1', async () => {
      const uid = (await podmanOk('exec', `${RUN}-1`, 'id', '-u')).trim();
      expect(uid !== '0', `podman exec id -u → ${uid}`);
      const top = await podmanOk('top', `${RUN}-1`, 'user', 'pid', 'args');
      const rows = top.split('\n').slice(1).map((l) => l.trim().split(/\s+/));
      expect(rows.length > 0, `podman top: ${top}`);
      const root = rows.filter(([user]) => user === 'root' || user === '0');
      expect(root.length === 0, `root processes: ${root.map((r) => r.join(' ')).join('; ')}`);
      const pid1 = rows.find((r) => r[1] === '1');
      expect(pid1 && pid1[2] === 'node', `PID 1: ${pid1?.join(' ')}`);
      return `id -u → ${uid}; podman top: ${rows.map((r) => `${r[0]} ${r[1]} ${r.slice(2).join(' ')}`).join('; ')}`;
    });
    await check('the prebuilt bundle runs (no rebuild, no tsx fallback at start)', async () => {
      const logs = await podman('logs', `${RUN}-1`);
      const all = logs.out + logs.err;
      expect(!/could not build the sources|running them through tsx/.test(all), all.slice(-1000));
      expect(/"msg":"ephemail started"/.test(all), `no start line in the log:\n${all.slice(-1000)}`);
      return 'log: "ephemail started"';
    });
  }

  // 5. restart on the same volume; stop during a held long-poll ---------------------------------------
  say('\n[5/7] restart on the same volume, and stop during a held long-poll');
  {
    await check('stop, remove, and a new container on the same volume keeps the mail', async () => {
      const stop = await podman('stop', '-t', '10', `${RUN}-1`);
      expect(stop.code === 0, `podman stop: ${stop.err}`);
      const code = await exitCodeOf(`${RUN}-1`);
      expect(code === 0, `first container exited ${code}`);
      await podmanOk('rm', '-v', `${RUN}-1`);
      cleanup.containers.delete(`${RUN}-1`);
      ports = await startContainer(`${RUN}-2`, volume);
      await waitLive(ports.http);
      await waitHealthy(ports.http);
      const hit = await findListed(ports.http, box, subject, 3000);
      expect(!mailId || hit.id === mailId, `listed with another id: ${hit.id} (was ${mailId})`);
      return `${hit.id} still listed by the new container`;
    });
    await check('podman stop -t 10 answers a held long-poll and the container exits 0 within 10 s', async () => {
      const key = await mintKey(ports.http);
      const empty = `nobody-${process.pid}@ephemail.test`;
      const { answer } = await holdWait(ports.http, key, empty, 30);
      await new Promise((r) => setTimeout(r, 1000)); // held a while, as a test waiting for mail would be
      const t0 = Date.now();
      const stop = podman('stop', '-t', '10', `${RUN}-2`);
      const r = await answer;
      const answeredMs = Date.now() - t0;
      const s = await stop;
      const stopMs = Date.now() - t0;
      expect(s.code === 0, `podman stop exited ${s.code}: ${s.err}`);
      const code = await exitCodeOf(`${RUN}-2`);
      expect(r.status === 200 && Array.isArray(r.json?.data) && r.json.data.length === 0 && r.json.meta?.waited === true, `the long-poll got ${r.status} ${r.text.slice(0, 300)}`);
      // answered by the shutdown, not by its own 30 s running out
      expect(answeredMs < STOP_LIMIT_MS && r.ms < 25_000, `the long-poll was answered ${secs(answeredMs)} after stop began (${secs(r.ms)} after it began)`);
      expect(code === 0, `the container exited ${code}${code === 137 ? ' (SIGKILL: SIGTERM was not handled in time)' : ''}`);
      expect(stopMs < STOP_LIMIT_MS, `podman stop took ${secs(stopMs)}`);
      const logs = await podman('logs', `${RUN}-2`);
      expect(/"signal":"SIGTERM".*shutting down/.test(logs.out + logs.err), 'no "shutting down" with SIGTERM in the log');
      return `the poll, held ${secs(r.ms - answeredMs)}, answered 200 [] ${secs(answeredMs)} after stop began; exit 0 after ${secs(stopMs)}`;
    });
    await podman('rm', '-v', `${RUN}-2`);
    cleanup.containers.delete(`${RUN}-2`);
  }

  // 6. the documented docker run line -----------------------------------------------------------------
  say('\n[6/7] the `docker run` line of docs/container.md (and of README.md, if it has one), run by podman');
  // every distinct line starting "docker run --rm" in either file; the same line in both runs once
  const lines = new Map();
  for (const file of ['docs/container.md', 'README.md']) {
    const text = existsSync(join(ROOT, file)) ? readFileSync(join(ROOT, file), 'utf8') : '';
    for (const [line] of text.matchAll(/^docker run --rm [^\n]*$/gm)) lines.set(line.trim(), [...(lines.get(line.trim()) ?? []), file]);
  }
  if (!lines.size) fail('the documented `docker run` line works', 'no line starting "docker run --rm" in docs/container.md or README.md');
  let n = 0;
  for (const [line, files] of lines) {
    n++;
    await check(`${files.join(' and ')}: \`${line}\` works (podman for docker, 127.0.0.1 ports, the test's volume)`, () => runDocsLine(line, n));
  }

  // 7. compose: two nodes on one Redis ---------------------------------------------------------------
  say('\n[7/7] compose.yaml: two nodes on one Redis (podman-compose)');
  {
    const project = `${RUN}-compose`.replace(/[^a-z0-9-]/g, '');
    const p = { A_HTTP_PORT: await freePort(), A_SMTP_PORT: await freePort(), B_HTTP_PORT: await freePort(), B_SMTP_PORT: await freePort() };
    composeEnv = { EPHEMAIL_IMAGE: IMAGE, REDIS_IMAGE, BASE_IMAGE, PUBLISH_ADDR: '127.0.0.1', ...Object.fromEntries(Object.entries(p).map(([k, v]) => [k, String(v)])) };
    cleanup.composeProjects.add(project);
    const up = await check('podman-compose up -d starts redis, ephemail-a and ephemail-b', async () => {
      const t0 = Date.now();
      const r = await compose(project, 'up', '-d');
      const ids = (await podman('ps', '-q', '--filter', `label=io.podman.compose.project=${project}`)).out.split(/\s+/).filter(Boolean);
      expect(r.code === 0 && ids.length === 3, `exit ${r.code}, ${ids.length} containers running:\n${(r.out + r.err).slice(-2500)}`);
      await waitLive(p.A_HTTP_PORT);
      await waitLive(p.B_HTTP_PORT);
      return `${ids.length} containers, ${secs(Date.now() - t0)}`;
    });
    if (up) {
      await check('both nodes healthy on the shared Redis', async () => {
        await waitHealthy(p.A_HTTP_PORT);
        await waitHealthy(p.B_HTTP_PORT);
        return `A http 127.0.0.1:${p.A_HTTP_PORT}, B http 127.0.0.1:${p.B_HTTP_PORT}`;
      });
      await check("no sender check asks the host's resolver: both nodes have EPHEMAIL_DNS_SERVERS=127.0.0.1:1", async () => {
        const seen = [];
        for (const svc of ['ephemail-a', 'ephemail-b']) {
          const id = (await podmanOk('ps', '-q', '--filter', `label=io.podman.compose.project=${project}`, '--filter', `label=com.docker.compose.service=${svc}`)).split('\n')[0];
          seen.push(`${svc} ${await expectNoHostDns(id, { network: true })}`);
        }
        return seen.join('; ');
      });
      await check('Redis runs with appendonly yes', async () => {
        const id = (await podmanOk('ps', '-q', '--filter', `label=io.podman.compose.project=${project}`, '--filter', 'label=com.docker.compose.service=redis')).split('\n')[0];
        const out = await podmanOk('exec', id, 'redis-cli', 'config', 'get', 'appendonly');
        expect(/appendonly\s+yes/.test(out), out);
        return out.replace(/\s+/g, ' ');
      });
      await check("a mail to node A's SMTP is listed on node B, and wakes a long-poll held on B", async () => {
        const key = await mintKey(p.A_HTTP_PORT);
        const to = `compose-${process.pid}@ephemail.test`;
        const subj = `compose ${process.pid} ${Date.now()}`;
        const { answer: held } = await holdWait(p.B_HTTP_PORT, key, to, 30);
        const t0 = Date.now();
        const reply = await sendMail(p.A_SMTP_PORT, to, subj);
        const r = await held;
        if (!(r.status === 200 && r.json?.data?.some((e) => e.subject === subj))) {
          const onA = await http(p.A_HTTP_PORT, `/api/v1/inboxes/${encodeURIComponent(to)}/emails`).catch((e) => ({ text: String(e) }));
          const onB = await http(p.B_HTTP_PORT, `/api/v1/inboxes/${encodeURIComponent(to)}/emails`).catch((e) => ({ text: String(e) }));
          const logs = [];
          for (const svc of ['ephemail-a', 'ephemail-b']) {
            const id = (await podman('ps', '-a', '-q', '--filter', `label=io.podman.compose.project=${project}`, '--filter', `label=com.docker.compose.service=${svc}`)).out.trim();
            const l = await podman('logs', '--tail', '8', id);
            logs.push(`${svc}:\n${(l.out + l.err).trim()}`);
          }
          throw new Error(`B's long-poll answered ${secs(r.ms)} after it began, ${secs(Date.now() - t0)} after the mail began (${reply}; ${reply.times}): ${r.status} ${r.text.slice(0, 300)}\nlist on A: ${onA.text?.slice(0, 300)}\nlist on B: ${onB.text?.slice(0, 300)}\n${logs.join('\n')}`);
        }
        const hit = await findListed(p.B_HTTP_PORT, to, subj, 3000);
        return `SMTP A 127.0.0.1:${p.A_SMTP_PORT} → listed on B as ${hit.id}; B's long-poll woke after ${secs(r.ms)} (key minted on A)`;
      });
    }
    await check('podman-compose down -v removes the containers and the Redis volume', async () => {
      const r = await composeDown(project);
      expect(r.code === 0, `exit ${r.code}: ${(r.out + r.err).slice(-1500)}`);
      const left = (await podman('ps', '-a', '-q', '--filter', `label=io.podman.compose.project=${project}`)).out.trim();
      const vols = (await podman('volume', 'ls', '-q', '--filter', `label=io.podman.compose.project=${project}`)).out.trim();
      expect(!left && !vols, `left: containers ${left || '-'}, volumes ${vols || '-'}`);
      return 'nothing left';
    });
  }
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    say(`\n${sig}: stopping, then cleaning up (again to quit at once, leaving things behind)`);
    for (const child of children) child.kill('SIGTERM');
  });
}

try {
  await main();
} catch (err) {
  if (interrupted) say('interrupted');
  else fail(err instanceof Fatal ? 'stopped' : 'unexpected error', err instanceof Fatal ? err.message : (err?.stack ?? err));
} finally {
  await removeEverything();
}
if (interrupted) process.exit(130);
say(`\ncontainer test: ${checks - failures.length} of ${checks} checks passed in ${secs(Date.now() - started)}`);
if (failures.length) say(`FAILED:\n${failures.map((f) => `  - ${f.split('\n')[0]}`).join('\n')}`);
process.exit(failures.length ? 1 : 0); // idle keep-alive sockets to stopped containers must not hold the exit
