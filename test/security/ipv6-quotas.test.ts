// One IPv6 site must not multiply its quotas by its /64s, over real HTTP: anonymous requests (API
// and MCP) and free keys count in the client's /64, its /56 and its /48 together (REQUEST_SCALE,
// KEY_MINT_SCALE). Before, a /48 minted ~196,608 keys a day (3 per /64) and each /64 had a full
// request quota. Client addresses come from X-Forwarded-For through a trusted proxy on loopback.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { KEY_MINT_SCALE, REQUEST_SCALE } from '../../src/domain/limits.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { midMinuteClock } from '../helpers/time.ts';

const PER_MINUTE = 5;
let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_TRUST_PROXY: 'true', EPHEMAIL_LIMIT_ANON_PER_MINUTE: String(PER_MINUTE), EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY: '3' }, { clock: midMinuteClock() });
});
after(() => svc.stop());

const as = (ip: string, path: string, init: RequestInit = {}) => svc.api(path, { ...init, headers: { ...(init.headers as Record<string, string>), 'x-forwarded-for': ip } });
const mint = (ip: string) => as(ip, '/api/v1/keys', { method: 'POST' });

describe('free keys per IPv6 /64, /56 and /48', () => {
  test('3 per /64, 6 per /56, 12 per /48 a day; a neighbouring /48 and IPv4 are not affected', async () => {
    assert.deepEqual({ ...KEY_MINT_SCALE }, { per56: 2, per48: 4 });
    // one /64: 3, then refused
    for (let i = 1; i <= 3; i++) assert.equal((await mint(`2001:db8:a:100::${i}`)).status, 201, `key ${i} of the /64`);
    const own = await mint('2001:db8:a:100::9');
    assert.equal(own.status, 429);
    assert.match((await own.json()).error.message, /This IP address already created 3 keys/);
    // the same /56, another /64: 3 more, then the /56 is full even for a fresh /64
    for (let i = 1; i <= 3; i++) assert.equal((await mint(`2001:db8:a:101::${i}`)).status, 201, `key ${i} of the second /64`);
    const full56 = await mint('2001:db8:a:1ff::1');
    assert.equal(full56.status, 429, 'the 7th key of one /56, from a /64 that made none');
    const body = await full56.json();
    assert.equal(body.error.type, 'rate_limited');
    assert.match(body.error.message, /2001:db8:a:100::\/56 already created 6 keys today/);
    assert.ok(Number(full56.headers.get('retry-after')) >= 1);
    // other /56s of the /48: 6 more in all, then the /48 is full even for a fresh /56
    for (let i = 1; i <= 3; i++) assert.equal((await mint(`2001:db8:a:200::${i}`)).status, 201);
    for (let i = 1; i <= 3; i++) assert.equal((await mint(`2001:db8:a:300::${i}`)).status, 201);
    const full48 = await mint('2001:db8:a:ff00::1');
    assert.equal(full48.status, 429, 'the 13th key of one /48, from a /56 that made none');
    assert.match((await full48.json()).error.message, /2001:db8:a::\/48 already created 12 keys today/);
    // elsewhere
    assert.equal((await mint('2001:db8:b::1')).status, 201, 'a neighbouring /48');
    assert.equal((await mint('198.51.100.20')).status, 201, 'an IPv4 client');
  });
});

describe('anonymous requests per IPv6 /64, /56 and /48', () => {
  test(`each /64 gets its quota; a /56 gets ${REQUEST_SCALE.per56}×, a /48 ${REQUEST_SCALE.per48}× (API and MCP count alike)`, async () => {
    assert.deepEqual({ ...REQUEST_SCALE }, { per56: 4, per48: 16 });
    const get = (ip: string) => as(ip, '/api/v1/domains');
    // one /64: PER_MINUTE, then 429
    for (let i = 0; i < PER_MINUTE; i++) assert.equal((await get('2001:db8:c:100::1')).status, 200);
    assert.equal((await get('2001:db8:c:100::2')).status, 429, 'the /64 is over');
    // the /56 holds 4 × PER_MINUTE across its /64s (the refused one above counted too)
    let ok = PER_MINUTE;
    for (let n = 1; n < 8; n++) {
      for (let i = 0; i < PER_MINUTE; i++) if ((await get(`2001:db8:c:1${n.toString(16).padStart(2, '0')}::1`)).status === 200) ok++;
    }
    assert.equal(ok, 4 * PER_MINUTE - 1, 'the /56 admitted four clients\' worth (less the refused request it counted)');
    const over = await get('2001:db8:c:1ff::1');
    assert.equal(over.status, 429, 'a fresh /64 of a full /56');
    assert.equal((await over.json()).error.type, 'rate_limited');
    // an MCP initialize from a fresh /64 of the same /56 is refused too: the same buckets
    const mcp = await as('2001:db8:c:1fe::1', '/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
    });
    assert.equal(mcp.status, 429, 'MCP from the same full /56');
    // another /56 of the /48 still works; IPv4 is its own
    assert.equal((await get('2001:db8:c:200::1')).status, 200);
    assert.equal((await get('198.51.100.21')).status, 200);
  });
});
