// The published package works on its own: `npm pack` of this repository, installed into an empty
// directory (dependencies from the npm registry, as a user would), then `npx ephemail serve` there
// answers health, receives a mail over SMTP and lists it. The install prints no EBADENGINE warning
// on the Node that runs the tests (22 or 24: package.json "engines"). The tarball carries the bundle
// (dist/, built by `prepack`: that build only, not older ones) and no TypeScript sources, and the
// install has neither tsx nor esbuild: the service runs without a build tool.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import nodemailer from 'nodemailer';

const root = resolve(import.meta.dirname, '../..');

test('npm pack → install into an empty directory → npx ephemail serve answers health and receives mail', { timeout: 600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ephemail-pack-'));
  const app = join(dir, 'app');
  const env = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
  let child: ReturnType<typeof spawn> | null = null;
  try {
    const pack = spawnSync('npm', ['pack', '--pack-destination', dir], { cwd: root, encoding: 'utf8', env, timeout: 120_000 });
    assert.equal(pack.status, 0, pack.stderr);
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball, `a tarball in ${dir}`);
    const listed = spawnSync('tar', ['-tzf', join(dir, tarball!)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    const manifest = JSON.parse(spawnSync('tar', ['-xzOf', join(dir, tarball!), 'package/dist/manifest.json'], { encoding: 'utf8' }).stdout) as { main: string; files: string[] };
    const bundled = listed.filter((f) => /^package\/dist\/[^/]+$/.test(f)).map((f) => f.slice('package/dist/'.length)).sort();
    assert.deepEqual(bundled, ['manifest.json', ...manifest.files].sort(), 'dist/ holds the build the manifest names, and nothing of older builds');
    assert.ok(manifest.files.includes(manifest.main));
    assert.ok(listed.some((f) => f.startsWith('package/dist/assets/')), 'the web assets beside the bundle');
    assert.deepEqual(listed.filter((f) => /^package\/(src|scripts|test)\//.test(f)), [], 'no sources, scripts or tests in the tarball');

    spawnSync('mkdir', [app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'ephemail-pack-check', version: '1.0.0', private: true }));
    const install = spawnSync('npm', ['install', '--prefer-offline', join(dir, tarball!)], { cwd: app, encoding: 'utf8', env, timeout: 480_000 });
    assert.equal(install.status, 0, `npm install: ${install.stderr.slice(-2000)}`);
    assert.doesNotMatch(install.stderr, /EBADENGINE/, 'no dependency needs a newer Node than "engines" says');
    for (const tool of ['tsx', 'esbuild']) assert.ok(!existsSync(join(app, 'node_modules', tool)), `${tool} installed with the package: it is a dev dependency`);

    // its own process group: npx runs the service as a child of its own, and both must stop at the end
    child = spawn('npx', ['--no-install', 'ephemail', 'serve'], {
      detached: true,
      cwd: app,
      env: { ...env, EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_LOG_LEVEL: 'info', EPHEMAIL_STORE: 'sqlite:./data/mail.db' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const started = await new Promise<{ http: string; smtp: string }>((resolveStart, reject) => {
      const timer = setTimeout(() => reject(new Error(`no 'ephemail started' within 60 s: ${stderr}`)), 60_000);
      child!.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
      // stdout is read to the end, line by line (an unread pipe would stall the process)
      createInterface({ input: child!.stdout! }).on('line', (line) => {
        try {
          const rec = JSON.parse(line);
          if (rec.msg === 'ephemail started') {
            clearTimeout(timer);
            resolveStart({ http: rec.http, smtp: rec.smtp });
          }
        } catch {
          // a banner line
        }
      });
    });
    const health = await fetch(`${started.http}/api/v1/health`);
    assert.equal(health.status, 200);
    assert.deepEqual((await health.json()).data, { status: 'ok', database: 'connected', smtp: 'running' });
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: Number(started.smtp.split(':').pop()), secure: false, ignoreTLS: true });
    await transport.sendMail({ from: 'a@sender.example', to: 'packed@ephemail.test', subject: 'from the packed build', text: 'hi' });
    transport.close();
    const list = await (await fetch(`${started.http}/api/v1/inboxes/packed@ephemail.test/emails`)).json();
    assert.deepEqual(list.data.map((e: { subject: string }) => e.subject), ['from the packed build']);
    assert.doesNotMatch(stderr, /ephemail: (no build|warning)/, 'the installed package runs its bundle as it is');
  } finally {
    if (child?.pid !== undefined) {
      const group = -child.pid;
      const exited = child.exitCode === null ? new Promise((r) => child!.once('exit', r)) : Promise.resolve();
      try {
        process.kill(group, 'SIGTERM'); // npx and the service it started
      } catch {
        // already gone
      }
      const timer = setTimeout(() => {
        try {
          process.kill(group, 'SIGKILL');
        } catch {
          // gone
        }
      }, 15_000);
      await exited;
      // the service itself (npx's child) may outlive npx by its shutdown: wait until the group is empty
      for (let i = 0; i < 150; i++) {
        try {
          process.kill(group, 0);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 100)); // poll: until the process group is gone (signal 0 fails)
      }
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  }
});
