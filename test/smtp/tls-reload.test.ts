// Certificates that renew (EPHEMAIL_SMTP_TLS_CERT / _KEY): a pair replaced on disk is served to the
// next STARTTLS session (the fingerprint the client sees), a session already in TLS keeps its
// certificate and goes on, a broken pair leaves the previous one in use and is logged as an error,
// and SIGHUP re-reads the files (in the real process too, which keeps running). Real sockets.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import selfsigned from 'selfsigned';
import { createSmtpReceiver } from '../../src/smtp/server.ts';
import { captureLog, type CapturedLog } from '../helpers/log.ts';
import { spawnServe } from '../helpers/serve.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, message, toWire } from '../helpers/smtp.ts';
import { until } from '../helpers/time.ts';

interface Pair {
  cert: string;
  key: string;
  fingerprint: string;
  notAfter: number;
}

async function makePair(name: string, days: number): Promise<Pair> {
  const gen = selfsigned.generate as unknown as (attrs: { name: string; value: string }[], opts: Record<string, unknown>) => Promise<{ private: string; cert: string }>;
  const pems = await gen([{ name: 'commonName', value: name }], { days, keySize: 2048, algorithm: 'sha256' });
  const x = new X509Certificate(pems.cert);
  return { cert: pems.cert, key: pems.private, fingerprint: x.fingerprint256, notAfter: new Date(x.validTo).getTime() };
}

/** Writes the pair the way renewal tools do: new files beside the old, renamed over them. */
function install(dir: string, pair: { cert: string; key: string }): void {
  writeFileSync(join(dir, '.key.tmp'), pair.key);
  writeFileSync(join(dir, '.cert.tmp'), pair.cert);
  renameSync(join(dir, '.key.tmp'), join(dir, 'key.pem'));
  renameSync(join(dir, '.cert.tmp'), join(dir, 'cert.pem'));
}

/** The fingerprint a new STARTTLS session is shown. */
async function servedFingerprint(port: number): Promise<string> {
  const { client, greeting } = await SmtpClient.open(port);
  assert.equal(greeting.code, 220);
  assert.match((await client.cmd('EHLO probe.example')).text, /STARTTLS/);
  const { client: secure, tls } = await client.startTls();
  const fp = tls.getPeerCertificate().fingerprint256;
  await secure.quit();
  return fp;
}

let A: Pair;
let B: Pair;
let C: Pair;
before(async () => {
  [A, B, C] = await Promise.all([makePair('mx-a.ephemail.test', 30), makePair('mx-b.ephemail.test', 60), makePair('mx-c.ephemail.test', 90)]);
});

describe('STARTTLS certificate files re-read when they change', () => {
  let dir: string;
  let svc: TestService;
  let captured: CapturedLog;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ephemail-tls-'));
    install(dir, A);
    captured = captureLog();
    svc = await startService({ EPHEMAIL_SMTP_TLS_CERT: join(dir, 'cert.pem'), EPHEMAIL_SMTP_TLS_KEY: join(dir, 'key.pem') }, { mounts: [], log: captured.log });
  });
  after(async () => {
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a pair replaced on disk is served to the next STARTTLS session; a session already in TLS keeps its certificate and delivers', async () => {
    assert.equal(await servedFingerprint(svc.smtpPort), A.fingerprint);
    // a session in flight, in TLS with A
    const { client: plain } = await SmtpClient.open(svc.smtpPort);
    await plain.cmd('EHLO inflight.example');
    const { client: inflight, tls } = await plain.startTls();
    assert.equal(tls.getPeerCertificate().fingerprint256, A.fingerprint);

    install(dir, B);
    await until(async () => (await servedFingerprint(svc.smtpPort)) === B.fingerprint, 'new STARTTLS sessions get certificate B');
    const reloaded = captured.find('STARTTLS certificate reloaded');
    assert.equal(reloaded.at(-1)?.fingerprint256, B.fingerprint);

    // the session in flight is untouched: still A, and it still delivers
    assert.equal(tls.getPeerCertificate().fingerprint256, A.fingerprint);
    assert.equal((await inflight.cmd('EHLO inflight.example')).code, 250);
    assert.equal((await inflight.cmd('MAIL FROM:<a@sender.example>')).code, 250);
    assert.equal((await inflight.cmd('RCPT TO:<tls-inflight@ephemail.test>')).code, 250);
    const data = await inflight.data(toWire(message({ From: 'a@sender.example', Subject: 'over the old certificate' }, 'x')));
    assert.equal(data.code, 250, data.text);
    await inflight.quit();

    const metrics = await (await svc.api('/metrics')).text();
    const m = /^ephemail_smtp_tls_certificate_expiry_timestamp_seconds (\S+)$/m.exec(metrics);
    assert.equal(Number(m?.[1]), B.notAfter / 1000, 'the expiry gauge follows the certificate in use');
  });

  test('a broken pair keeps the certificate in use and logs an error; a good pair after it is taken', async () => {
    assert.equal(await servedFingerprint(svc.smtpPort), B.fingerprint);
    const errors = () => captured.lines.filter((l) => l.level === 50 && String(l.msg).includes('keeping the certificate in use'));
    const before = errors().length;

    install(dir, { cert: C.cert, key: B.key }); // a certificate with another certificate's key
    await until(() => errors().length === before + 1, 'the mismatched pair is logged as an error');
    assert.equal(await servedFingerprint(svc.smtpPort), B.fingerprint);

    install(dir, { cert: '-----BEGIN CERTIFICATE-----\nnot base64\n', key: C.key }); // half-written
    await until(() => errors().length === before + 2, 'the broken certificate is logged as an error');
    assert.equal(await servedFingerprint(svc.smtpPort), B.fingerprint);
    assert.match(String((errors().at(-1)?.err as { message?: string })?.message), /./);

    install(dir, C);
    await until(async () => (await servedFingerprint(svc.smtpPort)) === C.fingerprint, 'the repaired pair is served');
  });
});

describe('SIGHUP', () => {
  test('reloadTls (what SIGHUP calls) re-reads at once: reloaded, then unchanged, and a broken pair fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ephemail-tls-'));
    install(dir, A);
    const svc = await startService({}, { mounts: [] });
    // the directory watch waits a minute here, so only the explicit re-read can pick the change up
    const rx = createSmtpReceiver(svc.service.core, {}, { key: A.key, cert: A.cert, files: { certFile: join(dir, 'cert.pem'), keyFile: join(dir, 'key.pem'), settleMs: 60_000, pollMs: 600_000 } });
    const port = ((await rx.listen(0, '127.0.0.1')) as AddressInfo).port;
    try {
      assert.equal(await servedFingerprint(port), A.fingerprint);
      install(dir, B);
      assert.equal(await servedFingerprint(port), A.fingerprint, 'nothing re-read yet');
      assert.equal(await rx.reloadTls('SIGHUP'), 'reloaded');
      assert.equal(await servedFingerprint(port), B.fingerprint);
      assert.equal(await rx.reloadTls('SIGHUP'), 'unchanged');
      install(dir, { cert: A.cert, key: B.key });
      assert.equal(await rx.reloadTls('SIGHUP'), 'failed');
      assert.equal(await servedFingerprint(port), B.fingerprint);
      rmSync(join(dir, 'cert.pem'));
      assert.equal(await rx.reloadTls('SIGHUP'), 'failed', 'a missing file keeps the certificate too');
      assert.equal(await servedFingerprint(port), B.fingerprint);
    } finally {
      await rx.close();
      await svc.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the real process: SIGHUP re-reads the files and the process keeps serving', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ephemail-tls-'));
    install(dir, A);
    const served = await spawnServe({ EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_SMTP_TLS_CERT: join(dir, 'cert.pem'), EPHEMAIL_SMTP_TLS_KEY: join(dir, 'key.pem') });
    try {
      served.child.kill('SIGHUP');
      await until(() => served.logs.some((l) => l.msg === 'SIGHUP: STARTTLS certificate unchanged'), 'the SIGHUP is answered in the log');
      assert.equal(served.child.exitCode, null, 'SIGHUP does not end the process');
      assert.equal(await servedFingerprint(served.smtpPort), A.fingerprint);
      install(dir, B);
      served.child.kill('SIGHUP');
      await until(async () => (await servedFingerprint(served.smtpPort)) === B.fingerprint, 'the renewed certificate is served');
      assert.ok(served.logs.some((l) => l.msg === 'STARTTLS certificate reloaded; new connections get it' && l.fingerprint256 === B.fingerprint));
    } finally {
      served.child.kill('SIGTERM');
      await new Promise((r) => (served.child.exitCode !== null ? r(null) : served.child.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
