// Held resources on the real process: 1,000 idle SMTP connections and 5,000 held
// long-polls at once. Memory stays bounded (measured from /proc and reported), the service keeps
// answering, the connection over the global cap gets 421, and SIGTERM answers every held poll.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { spawnService, type ServiceProcess } from './process.ts';
import { message, sendRaw } from '../helpers/smtp.ts';
import { metric } from '../helpers/metrics.ts';
import { procStatusBytes } from '../helpers/serve.ts';
import { until } from '../helpers/time.ts';

const D = 'ephemail.test';
const IDLE_SMTP = 1000;
const HELD_POLLS = 5000;
const rssMiB = (pid: number) => procStatusBytes(pid, 'VmRSS') / (1024 * 1024);

let svc: ServiceProcess | null = null;
const dir = mkdtempSync(join(tmpdir(), 'ephemail-load-'));
const sockets: Socket[] = [];
after(() => {
  for (const s of sockets) s.destroy();
  if (svc && svc.proc.exitCode === null && svc.proc.signalCode === null) svc.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** An idle SMTP connection from a given loopback source address; resolves with the greeting line. */
function idle(port: number, localAddress: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: '127.0.0.1', localAddress });
    sockets.push(s);
    let got = '';
    s.setEncoding('latin1');
    s.on('error', reject);
    s.on('data', (d: string) => {
      got += d;
      if (got.includes('\r\n')) resolve(got.split('\r\n')[0]);
    });
  });
}

test(`${IDLE_SMTP} idle SMTP connections and ${HELD_POLLS} held long-polls: bounded memory, still answering`, { timeout: 180_000, skip: process.platform !== 'linux' ? 'needs /proc and 127.0.0.0/8 source addresses' : false }, async (t) => {
  svc = await spawnService({
    EPHEMAIL_STORE: `sqlite:${join(dir, 'load.db')}`,
    EPHEMAIL_LIMIT_KEY_CONCURRENT_WAITS: String(HELD_POLLS),
    EPHEMAIL_LIMIT_KEY_PER_MINUTE: '1000000',
    EPHEMAIL_LIMIT_KEY_PER_DAY: '10000000',
  });
  const pid = svc.proc.pid!;
  const http = svc.http;
  const key = (await (await fetch(`${http}/api/v1/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()).data.api_key;
  // warm up the paths being measured
  await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`warm@${D}`], body: message({ Subject: 'warm' }, 'x') });
  await (await fetch(`${http}/api/v1/inboxes/warm@${D}/emails`)).arrayBuffer();
  const base = rssMiB(pid);

  // 1,000 idle SMTP connections, 20 from each of 50 loopback addresses (under the per-IP cap of 50)
  const greetings = await Promise.all(Array.from({ length: IDLE_SMTP }, (_, i) => idle(svc!.smtpPort, `127.0.0.${2 + Math.floor(i / 20)}`)));
  assert.equal(greetings.filter((g) => g.startsWith('220')).length, IDLE_SMTP);
  const afterSmtp = rssMiB(pid);
  const over = await idle(svc.smtpPort, '127.0.1.1');
  assert.match(over, /^421 /, 'the connection over the global cap gets 421');

  // 5,000 held long-polls on 100 addresses, each on its own connection (fetch opens as many as needed)
  const polls = Array.from({ length: HELD_POLLS }, (_, i) =>
    fetch(`${http}/api/v1/inboxes/held${i % 100}@${D}/emails?wait=30`, { headers: { authorization: `Bearer ${key}` } })
      .then(async (r) => ({ status: r.status, count: (await r.json()).data?.length ?? -1 }))
      .catch(() => ({ status: -1, count: -1 })),
  );
  // wait until the service has taken every poll in (/me does not count), then one more wait must be refused
  const t0 = Date.now();
  let seen = 0;
  while (Date.now() - t0 < 90_000) {
    const me = await (await fetch(`${http}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })).json();
    seen = me.data.usage.requests_today; // the day window: a minute boundary could reset the other
    if (seen >= HELD_POLLS) break;
    await new Promise((r) => setTimeout(r, 250)); // poll: /me until the service has counted every poll
  }
  assert.ok(seen >= HELD_POLLS, `the service took in ${seen} of ${HELD_POLLS} polls`);
  await until(async () => (await metric(http, 'ephemail_waits_held')) === HELD_POLLS, `the service holds ${HELD_POLLS} waits`, 30_000, 100);
  const probe = await fetch(`${http}/api/v1/inboxes/probe@${D}/emails?wait=1`, { headers: { authorization: `Bearer ${key}` } });
  const probeBody = await probe.json();
  const held = probe.status === 429 && probeBody.error.type === 'too_many_waiters' ? HELD_POLLS : 0;
  assert.equal(held, HELD_POLLS, 'all polls are held by the service');
  const afterPolls = rssMiB(pid);

  // still answering: health, an API read, and a delivery once an SMTP slot is free
  const h0 = Date.now();
  const health = await fetch(`${http}/api/v1/health`);
  assert.equal(health.status, 200);
  await health.arrayBuffer();
  const healthMs = Date.now() - h0;
  const connections = await metric(http, 'ephemail_smtp_connections');
  for (const s of sockets.splice(0, 10)) s.destroy();
  await until(async () => (await metric(http, 'ephemail_smtp_connections')) <= connections - 10, 'the service saw ten SMTP connections close');
  const sent = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`held7@${D}`], body: message({ Subject: 'wake' }, 'wake up') });
  assert.equal(sent.data?.code, 250, sent.data?.text);

  t.diagnostic(`RSS MiB: base ${base.toFixed(0)}, +${IDLE_SMTP} idle SMTP ${afterSmtp.toFixed(0)} (${(((afterSmtp - base) * 1024) / IDLE_SMTP).toFixed(1)} KiB each), +${HELD_POLLS} polls ${afterPolls.toFixed(0)} (${(((afterPolls - afterSmtp) * 1024) / HELD_POLLS).toFixed(1)} KiB each); health in ${healthMs} ms`);
  assert.ok(afterPolls - base < 600, `memory grew by ${(afterPolls - base).toFixed(0)} MiB`);
  // bound: health answers under load (it is the behaviour); one-sided, generous
  assert.ok(healthMs < 5000, `health took ${healthMs} ms`);

  // SIGTERM: every held poll is answered (empty, or the woken inbox's mail), exit 0
  svc.proc.kill('SIGTERM');
  const results = await Promise.all(polls);
  assert.equal(results.filter((r) => r.status === 200).length, HELD_POLLS);
  assert.equal(results.filter((r, i) => i % 100 === 7 && r.count === 1).length, HELD_POLLS / 100, 'the polls on the woken inbox got its mail');
  assert.equal(await svc.exited, 0);
});
