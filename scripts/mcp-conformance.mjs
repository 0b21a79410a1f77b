#!/usr/bin/env node
// Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance, server side) against
// the tool endpoint: starts `ephemail serve` on free ports with an in-memory store (or uses --url),
// runs each scenario with test/mcp/conformance-expected-failures.yml as the baseline, stops the service.
//
//   node scripts/mcp-conformance.mjs                     the four scenarios that apply (default)
//   node scripts/mcp-conformance.mjs --suite active      every active scenario, against the baseline
//   node scripts/mcp-conformance.mjs --scenario ping     one scenario (repeatable)
//   node scripts/mcp-conformance.mjs --url http://127.0.0.1:8025/mcp   a service already running
//
// Exit: 0 all passed (or failed only as the baseline expects), 1 a failure, 3 the suite could not be
// fetched (no network or registry): the test in test/mcp/conformance.test.ts skips loudly on 3.
// The suite's 0.1.16 needs Node 22, hence `npx -p node@22`.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const root = resolve(import.meta.dirname, '..');
const PACKAGE = '@modelcontextprotocol/conformance@0.1.16';
const NPX = ['-y', '-p', 'node@22', '-p', PACKAGE, 'conformance'];
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];
const BASELINE = resolve(root, 'test/mcp/conformance-expected-failures.yml');

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const scenarios = args.flatMap((a, i) => (args[i - 1] === '--scenario' ? [a] : []));
const suite = opt('--suite');
let url = opt('--url');

const npxBin = process.platform === 'win32' ? 'npx.cmd' : 'npx';
function run(cmd, argv, options = {}) {
  return new Promise((done) => {
    const child = spawn(cmd, argv, { stdio: options.quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit', cwd: root, env: process.env });
    let out = '';
    const timer = setTimeout(() => {
      out += `\n(timed out after ${options.timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 600_000);
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    child.on('error', (err) => done({ code: 127, out: String(err) }));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      done({ code: code ?? (signal ? 1 : 0), out });
    });
  });
}

/** Starts `ephemail serve` on port 0; resolves with its /mcp URL and a stop function. */
function startService() {
  const env = {
    ...process.env,
    EPHEMAIL_HTTP_HOST: '127.0.0.1',
    EPHEMAIL_HTTP_PORT: '0',
    EPHEMAIL_SMTP_HOST: '127.0.0.1',
    EPHEMAIL_SMTP_PORT: '0',
    EPHEMAIL_STORE: 'sqlite::memory:',
    EPHEMAIL_LOG_LEVEL: 'info',
    // the suite sends every request from 127.0.0.1: keep it clear of the anonymous per-IP limit
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '10000000',
  };
  delete env.EPHEMAIL_PUBLIC_URL; // the DNS-rebinding scenario needs a loopback URL
  const child = spawn(process.execPath, [resolve(root, 'bin/ephemail.js'), 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((r) => child.on('exit', r));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      void stop();
      fail(new Error('ephemail did not log "ephemail started" within 30 s'));
    }, 30_000);
    child.on('exit', (code) => fail(new Error(`ephemail exited early (code ${code})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      let rec;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      if (rec.msg === 'ephemail started' && rec.http) {
        clearTimeout(timer);
        done({ url: `${rec.http}/mcp`, stop });
      }
    });
  });
}

// fetching node@22 and the suite the first time takes a while; an offline registry must not hang the tests
const probe = await run(npxBin, [...NPX, '--version'], { quiet: true, timeoutMs: 180_000 });
if (probe.code !== 0) {
  const banner = '#'.repeat(78);
  console.error(`\n${banner}\n# MCP CONFORMANCE SUITE UNAVAILABLE: npx could not fetch ${PACKAGE} (or node@22).\n# Nothing was checked. Output:\n${probe.out.split('\n').slice(-8).map((l) => `#   ${l}`).join('\n')}\n${banner}\n`);
  process.exit(3);
}

let service = null;
if (!url) {
  service = await startService();
  url = service.url;
}
console.log(`MCP conformance (${PACKAGE}) against ${url}`);
const results = [];
try {
  if (suite) {
    const r = await run(npxBin, [...NPX, 'server', '--url', url, '--suite', suite, '--expected-failures', BASELINE]);
    results.push({ name: `suite ${suite}`, ok: r.code === 0 });
  } else {
    for (const scenario of scenarios.length ? scenarios : SCENARIOS) {
      const r = await run(npxBin, [...NPX, 'server', '--url', url, '--scenario', scenario, '--expected-failures', BASELINE], { timeoutMs: 120_000 });
      results.push({ name: scenario, ok: r.code === 0 });
    }
  }
} finally {
  await service?.stop();
}
const failed = results.filter((r) => !r.ok);
for (const r of results) console.log(`${r.ok ? 'PASS' : 'FAIL'} ${r.name}`);
console.log(`${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
