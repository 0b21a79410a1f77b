#!/usr/bin/env node
// `npm test`: checks the services the suite needs (Redis loudly), then runs every test/**/*.test.ts
// with node's test runner through tsx. Pass paths to run a subset: `npm test -- test/http`.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const ci = process.env.CI === 'true' || process.env.CI === '1';

function redisAlive(url) {
  const u = new URL(url);
  return new Promise((done) => {
    const s = createConnection({ host: u.hostname, port: Number(u.port || 6379) });
    const t = setTimeout(() => { s.destroy(); done(false); }, 2000);
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => { clearTimeout(t); s.destroy(); done(d.toString().startsWith('+PONG')); });
    s.on('error', () => { clearTimeout(t); done(false); });
  });
}

const redisUrl = process.env.EPHEMAIL_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
if (await redisAlive(redisUrl)) {
  process.env.EPHEMAIL_TEST_REDIS_URL = redisUrl;
} else {
  const banner = '#'.repeat(78);
  console.error(`\n${banner}\n# NO REDIS at ${redisUrl}: the Redis store, multi-node and fault tests cannot run.\n# Start it: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ""\n${banner}\n`);
  if (ci) {
    console.error('CI=true: a missing Redis is a failure.');
    process.exit(1);
  }
  process.env.EPHEMAIL_TEST_REDIS_URL = '';
}

function collect(path, out) {
  const st = statSync(path);
  if (st.isDirectory()) {
    for (const name of readdirSync(path).sort()) if (name !== 'node_modules' && !name.startsWith('.')) collect(join(path, name), out);
  } else if (/\.test\.ts$/.test(path)) out.push(path);
  return out;
}

const args = process.argv.slice(2);
const targets = args.length ? args : ['test'];
const files = targets.flatMap((t) => collect(resolve(root, t), []));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
  cwd: root,
  env: { ...process.env, EPHEMAIL_LOG_LEVEL: process.env.EPHEMAIL_LOG_LEVEL ?? 'silent' },
});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
