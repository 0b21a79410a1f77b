// EPHEMAIL_TRUST_PROXY over real sockets: only a peer in the configured ranges may name the client,
// and what it names must be an IP address.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startService } from '../helpers/service.ts';

async function remaining(http: string, xff: string): Promise<{ status: number; remaining: number }> {
  const res = await fetch(`${http}/api/v1/domains`, { headers: { 'x-forwarded-for': xff } });
  await res.arrayBuffer();
  return { status: res.status, remaining: Number(res.headers.get('ratelimit-remaining')) };
}

test('a peer outside the configured proxy ranges cannot choose its bucket with X-Forwarded-For', async () => {
  const svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '50', EPHEMAIL_TRUST_PROXY: '10.0.0.0/8' }, { mounts: [] });
  try {
    const a = await remaining(svc.http, '198.51.100.1');
    const b = await remaining(svc.http, '198.51.100.2');
    assert.equal(b.remaining, a.remaining - 1, 'both counted against the real peer (127.0.0.1)');
  } finally {
    await svc.stop();
  }
});

test('a peer inside the ranges names the client; a value that is not an IP is refused', async () => {
  const svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '50', EPHEMAIL_TRUST_PROXY: '127.0.0.1,::1' }, { mounts: [] });
  try {
    const a = await remaining(svc.http, '198.51.100.1');
    const b = await remaining(svc.http, '198.51.100.2');
    assert.equal(a.remaining, b.remaining, 'two clients, two buckets');
    const bad = await fetch(`${svc.http}/api/v1/domains`, { headers: { 'x-forwarded-for': '198.51.100.1, not-an-ip' } });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.type, 'invalid_request');
  } finally {
    await svc.stop();
  }
});
