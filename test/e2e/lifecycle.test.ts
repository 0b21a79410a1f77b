// Email lifetime and process lifecycle (spec: States and transitions; docs/contract-decisions.md "Running it"):
// expiry, restart keeps mail and keys, SIGKILL mid-burst loses nothing acknowledged, SIGTERM
// answers held polls and exits 0, and Debian's swaks as a real-world SMTP client.
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { movableClock, until } from '../helpers/time.ts';
import { metric } from '../helpers/metrics.ts';
import { startService } from '../helpers/service.ts';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';
import { expectError, listAll } from '../helpers/contract.ts';
import { spawnServe } from '../helpers/serve.ts';

const BIN = resolve(import.meta.dirname, '../../bin/ephemail.js');
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'ephemail-life-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('expiry', () => {
  test('an email is gone after its TTL: 404 everywhere, not listed, its address is free again', async () => {
    const clock = movableClock();
    const svc = await startService({ EPHEMAIL_EMAIL_TTL_SECONDS: '2' }, { clock });
    try {
      const base = svc.http.replace('127.0.0.1', 'localhost');
      assert.equal((await (await svc.api('/api/v1')).json()).data.email_ttl_seconds, 2);
      await svc.send({ to: 'short@ephemail.test', subject: 'brief', text: 'x', attachments: [{ filename: 'a.txt', content: 'a' }] });
      const [s] = await listAll(svc.api, 'short@ephemail.test');
      assert.equal(Date.parse(s.expires_at) - Date.parse(s.received_at), 2000);
      const inbox = await svc.api('/api/v1/inboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"local_part":"short"}' });
      assert.equal(inbox.status, 409);
      clock.advance(2000); // the service's time reaches the expiry (no real wait)
      await expectError(await svc.api(`/api/v1/emails/${s.id}`), 404, 'not_found', base);
      await expectError(await svc.api(`/api/v1/emails/${s.id}/attachments`), 404, 'not_found', base);
      await expectError(await svc.api(`/api/v1/emails/${s.id}/attachments/1`), 404, 'not_found', base);
      await expectError(await svc.api(`/api/v1/emails/${s.id}`, { method: 'DELETE' }), 404, 'not_found', base);
      assert.deepEqual(await listAll(svc.api, 'short@ephemail.test'), []);
      const created = await svc.api('/api/v1/inboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"local_part":"short"}' });
      assert.equal(created.status, 201);
      assert.equal((await created.json()).data.email_ttl_seconds, 2);
      const purge = await svc.api('/api/v1/inboxes/short%40ephemail.test/emails', { method: 'DELETE' });
      assert.deepEqual((await purge.json()).data, { address: 'short@ephemail.test', deleted: 0 }, 'expired mail is not counted as deleted');
    } finally {
      await svc.stop();
    }
  });
});

describe('stop() with an SMTP transaction in flight', () => {
  test('the transaction in flight finishes with 250 and its mail is there after restart; new connections are refused', async () => {
    const dir = tempDir();
    const env = { EPHEMAIL_STORE: `sqlite:${join(dir, 'inflight.db')}` };
    const a = await startService(env);
    const { client } = await SmtpClient.open(a.smtpPort);
    await client.cmd('EHLO inflight.example');
    await client.cmd('MAIL FROM:<i@inflight.example>');
    await client.cmd('RCPT TO:<inflight@ephemail.test>');
    assert.equal((await client.cmd('DATA')).code, 354);
    client.write('From: i@inflight.example\r\nSubject: in flight\r\n\r\nfirst half ');
    const stopping = a.stop();
    await until(() => !a.service.smtp.running, 'the SMTP listener stopped accepting');
    await assert.rejects(SmtpClient.open(a.smtpPort), 'no new SMTP connections while stopping');
    client.write('second half\r\n.\r\n');
    const r = await client.read();
    assert.equal(r.code, 250, r.text);
    await client.quit();
    await stopping;
    const b = await startService(env);
    try {
      const list = await listAll(b.api, 'inflight@ephemail.test');
      assert.deepEqual(list.map((e) => e.subject), ['in flight']);
    } finally {
      await b.stop();
    }
  });
});

describe('restart', () => {
  test('mail and keys survive a restart; ids keep increasing', async () => {
    const dir = tempDir();
    const env = { EPHEMAIL_STORE: `sqlite:${join(dir, 'r.db')}` };
    const a = await startService(env);
    const key = (await (await a.api('/api/v1/keys', { method: 'POST' })).json()).data.api_key;
    await a.send({ to: 'keep@ephemail.test', subject: 'before restart', text: 'x', attachments: [{ filename: 'k.bin', content: Buffer.from([9, 8, 7]) }] });
    const [first] = await listAll(a.api, 'keep@ephemail.test');
    await a.stop();
    const b = await startService(env);
    try {
      const me = await b.api('/api/v1/me', { headers: { authorization: `Bearer ${key}` } });
      assert.equal(me.status, 200);
      assert.equal((await me.json()).data.kind, 'key');
      const e = (await (await b.api(`/api/v1/emails/${first.id}`)).json()).data;
      assert.equal(e.subject, 'before restart');
      const bytes = Buffer.from(await (await fetch(e.attachments[0].download_url.replace(/^https?:\/\/[^/]+/, b.http))).arrayBuffer());
      assert.deepEqual([...bytes], [9, 8, 7]);
      await b.send({ to: 'keep@ephemail.test', subject: 'after restart', text: 'y' });
      const list = await listAll(b.api, 'keep@ephemail.test');
      assert.deepEqual(list.map((x) => x.subject), ['after restart', 'before restart']);
      assert.ok(list[0].id > list[1].id);
    } finally {
      await b.stop();
    }
  });
});

/** Runs `ephemail serve` as a child process; checks what its start-up line says. */
async function startServe(env: Record<string, string>, args = ['serve']): Promise<{ child: ChildProcess; http: string; smtpPort: number; exited: Promise<number | null> }> {
  const served = await spawnServe(env, { args });
  const child = served.child;
  const exited = new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.on('exit', (code) => r(code))));
  const j = served.startLine as { http: string; smtp: string; store: string; domains: string[] };
  // the start-up line names the bound addresses, the store and the domains (docs/contract-decisions.md)
  assert.ok(!/:0$/.test(j.http) && !/:0$/.test(j.smtp), `actual ports: ${JSON.stringify(j)}`);
  assert.equal(j.store, env.EPHEMAIL_STORE);
  assert.deepEqual(j.domains, ['ephemail.test']);
  return { child, http: served.http, smtpPort: served.smtpPort, exited };
}

describe('the process', () => {
  test('SIGKILL in the middle of a delivery burst: every email that got a 250 is there after restart', { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const env = { EPHEMAIL_STORE: `sqlite:${join(dir, 'kill.db')}`, EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000' };
    const first = await startServe(env);
    const acked: { address: string; subject: string }[] = []; // every message has its own inbox
    let stop = false;
    const worker = async (n: number) => {
      let client: SmtpClient;
      try {
        ({ client } = await SmtpClient.open(first.smtpPort));
        await client.cmd('EHLO killer.example');
      } catch {
        return;
      }
      for (let i = 0; !stop; i++) {
        const address = `kill${n}-${i}@ephemail.test`;
        client.write(`MAIL FROM:<k@killer.example>\r\nRCPT TO:<${address}>\r\nDATA\r\n`);
        const replies = [await client.read().catch(() => null), await client.read().catch(() => null), await client.read().catch(() => null)];
        if (replies.some((r) => !r || r.code === 0) || replies[2]!.code !== 354) return;
        client.write(Buffer.concat([toWire(message({ From: 'k@killer.example', Subject: `burst ${n}-${i}` }, 'x'.repeat(2000))), Buffer.from('.\r\n')]));
        const r = await client.read().catch(() => null);
        if (!r || r.code === 0) return;
        if (r.code === 250) acked.push({ address, subject: `burst ${n}-${i}` });
      }
    };
    const workers = Promise.all([0, 1, 2, 3].map(worker));
    await until(() => acked.length >= 40, '40 messages acknowledged', 50_000);
    first.child.kill('SIGKILL');
    stop = true;
    await first.exited;
    await workers;
    assert.ok(acked.length >= 40);
    const second = await startServe(env);
    try {
      const missing: string[] = [];
      for (const { address, subject } of acked) {
        const res = await fetch(`${second.http}/api/v1/inboxes/${encodeURIComponent(address)}/emails`);
        const list = (await res.json()).data;
        if (list.length !== 1 || list[0].subject !== subject) missing.push(`${address}: ${JSON.stringify(list)}`);
      }
      assert.deepEqual(missing, [], `${acked.length} acknowledged`);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  test('SIGTERM: held polls are answered with their empty result, then exit 0', { timeout: 60_000 }, async () => {
    const dir = tempDir();
    const p = await startServe({ EPHEMAIL_STORE: `sqlite:${join(dir, 'term.db')}` });
    const key = (await (await fetch(`${p.http}/api/v1/keys`, { method: 'POST' })).json()).data.api_key;
    const held = fetch(`${p.http}/api/v1/inboxes/term%40ephemail.test/emails?wait=30`, { headers: { 'x-api-key': key } });
    await until(async () => (await metric(p.http, 'ephemail_waits_held')) === 1, 'the poll is held');
    const t0 = performance.now();
    p.child.kill('SIGTERM');
    const res = await held;
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(body.data, []);
    assert.equal(body.meta.waited, true);
    assert.equal(await p.exited, 0);
    // bound: shutdown is bounded (the poll would otherwise hold 30 s); one-sided and generous for a loaded machine
    assert.ok(performance.now() - t0 < 20_000, `stopped in ${Math.round(performance.now() - t0)} ms`);
  });

  test('no subcommand means serve', { timeout: 60_000 }, async () => {
    const dir = tempDir();
    const p = await startServe({ EPHEMAIL_STORE: `sqlite:${join(dir, 'default.db')}` }, []);
    assert.equal((await fetch(`${p.http}/api/v1/health`)).status, 200);
    p.child.kill('SIGINT');
    assert.equal(await p.exited, 0, 'SIGINT exits 0 too');
  });

  test('a bad configuration value stops start-up with a message naming the variable', async () => {
    const run = promisify(execFile);
    await assert.rejects(run(process.execPath, [BIN, 'serve'], { env: { ...process.env, EPHEMAIL_HTTP_PORT: 'eighty' }, timeout: 30_000 }), (err: any) => {
      assert.notEqual(err.code, 0);
      assert.match(`${err.stderr}${err.stdout}`, /EPHEMAIL_HTTP_PORT/);
      return true;
    });
  });
});

describe('swaks (Debian) as the SMTP client', { skip: !existsSync('/usr/bin/swaks') && 'swaks is not installed (apt-get install swaks)' }, () => {
  test('a message sent with swaks, with an attachment, is served', async () => {
    const svc = await startService();
    try {
      const dir = tempDir();
      const file = join(dir, 'report.csv');
      (await import('node:fs')).writeFileSync(file, 'a,b\n1,2\n');
      const run = promisify(execFile);
      const { stdout } = await run('swaks', [
        '--server', '127.0.0.1', '--port', String(svc.smtpPort), '--from', 'swaks@Tooling.Example', '--to', 'Swaks.User@ephemail.test',
        '--header', 'Subject: =?UTF-8?Q?sw=C3=A4ks?= test', '--body', 'sent by swaks', '--attach', `@${file}`, '--attach-type', 'text/csv', '--attach-name', 'report.csv',
      ], { timeout: 30_000 });
      assert.match(stdout, /<-\s+250 /);
      const [s] = await listAll(svc.api, 'swaks.user@ephemail.test');
      assert.equal(s.subject, 'swäks test');
      assert.equal(s.mailed_by, 'tooling.example');
      const e = (await (await svc.api(`/api/v1/emails/${s.id}`)).json()).data;
      assert.match(e.text_body, /sent by swaks/);
      assert.equal(e.attachments.length, 1);
      assert.equal(e.attachments[0].filename, 'report.csv');
      assert.equal(e.attachments[0].size_bytes, 8);
      // and a rejected domain shows as a 550 in swaks' own transcript
      await assert.rejects(run('swaks', ['--server', '127.0.0.1', '--port', String(svc.smtpPort), '--to', 'x@not-served.example', '--from', 'a@b.example'], { timeout: 30_000 }), (err: any) => {
        assert.match(err.stdout, /<\*\*\s+550 5\.1\.2/);
        return true;
      });
    } finally {
      await svc.stop();
    }
  });
});
