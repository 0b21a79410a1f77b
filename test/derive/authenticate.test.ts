// The verdicts' own bounds (issue 35 finding 3, issue 34): what one message may make the service ask
// of DNS, against a DNS server of this test on loopback that counts every question it gets; and that
// the verdicts' module loads mailauth's four checks without BIMI's stack.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { countingDns, type CountingDns, type DnsRecord } from '../helpers/counting-dns.ts';
import { authenticateMessage, SPF_LIMITS, VERDICT_LOOKUPS, type AuthTask } from '../../src/derive/authenticate.ts';

/**
 * The sender's zone of the finding: `<d>`'s SPF record has `terms` `mx:` terms (m0.<d> …), each MX
 * with `hosts` names, each name with an A and an AAAA record, none of them the client's.
 */
const mxZone = (terms: number, hosts: number) => (name: string): DnsRecord[] => {
  const labels = name.split('.');
  if (labels[0] === '_dmarc') return [];
  const spf = /^(?:[a-z0-9-]+\.)*evil\.test$/.test(name) && !/^[mh]\d+\./.test(name);
  if (spf) return [{ type: 'TXT', data: `v=spf1 ${Array.from({ length: terms }, (_, j) => `mx:m${j}.${name}`).join(' ')} -all` }];
  if (/^m\d+\./.test(name)) return Array.from({ length: hosts }, (_, k) => ({ type: 'MX' as const, exchange: `h${k}.${name}` }));
  if (/^h\d+\.m\d+\./.test(name)) return [{ type: 'A', address: '203.0.113.9' }, { type: 'AAAA', address: '2001:db8::9' }];
  return [];
};

const message = (from: string) => Buffer.from(`From: <a@${from}>\r\nTo: <x@ephemail.test>\r\nSubject: hi\r\n\r\nbody\r\n`);
const task = (server: string, clientIp: string, mailFrom: string): AuthTask => ({
  envelope: { clientIp, helo: 'client.test', mailFrom }, dnsServers: [server], authservId: 'ephemail.test', budgetMs: 8000, queryTimeoutMs: 2000,
});
/** The questions SPF asks of a sender domain's zone (the record, the MX lists, the MX names' addresses). */
const spfQuestions = (questions: readonly string[], domain: string) => questions.filter((q) => q.endsWith(` ${domain}`) || q.endsWith(`.${domain}`)).filter((q) => !q.includes('_dmarc.'));
/** RFC 7208 4.6.4 for this record: the record, then per term its MX list and at most 10 address lookups. */
const RFC_BOUND = 1 + SPF_LIMITS.terms * (1 + SPF_LIMITS.namesPerTerm);

describe('the DNS lookups of one verdict (issue 35 finding 3)', () => {
  let dns: CountingDns;
  before(async () => {
    dns = await countingDns((name) => (name.includes('eleven-terms.') ? mxZone(11, 10)(name) : name.includes('eleven-hosts.') ? mxZone(10, 11)(name) : mxZone(10, 10)(name)));
  });
  after(async () => dns?.close());

  const verdict = async (clientIp: string, domain: string) => {
    const before = dns.questions.length;
    const v = await authenticateMessage(message(domain), task(dns.server, clientIp, `a@${domain}`));
    const asked = dns.questions.slice(before);
    return { v, asked, spf: spfQuestions(asked, domain) };
  };

  test(`ten mx: terms of ten hosts each, IPv4 client: at most RFC 7208's ${RFC_BOUND} questions for SPF, A only, and the RFC's verdict (fail)`, async () => {
    const { v, asked, spf } = await verdict('192.0.2.7', 'ten.evil.test');
    assert.equal(spf.filter((q) => q.startsWith('A h')).length, 100, 'every MX host looked up (the record is within the limits)');
    assert.equal(v.spf.result, 'fail', v.header);
    assert.ok(spf.length <= RFC_BOUND, `${spf.length} questions for SPF`);
    assert.deepEqual(asked.filter((q) => q.startsWith('AAAA ')), [], 'no AAAA asked for an IPv4 client');
    assert.ok(asked.length <= VERDICT_LOOKUPS.spf + VERDICT_LOOKUPS.others, `${asked.length} questions for the message`);
  });

  test('the same from an IPv6 client: AAAA only for the MX hosts, within the same bound, the same verdict', async () => {
    const { v, asked, spf } = await verdict('2001:db8::7', 'ten6.evil.test');
    assert.equal(v.spf.result, 'fail', v.header);
    assert.ok(spf.length <= RFC_BOUND, `${spf.length} questions for SPF`);
    assert.deepEqual(asked.filter((q) => /^A h\d+\./.test(q)), [], 'no A asked for the MX hosts of an IPv6 client');
  });

  test('an IPv4-mapped IPv6 client is an IPv4 client', async () => {
    const { v, asked } = await verdict('::ffff:192.0.2.7', 'mapped.evil.test');
    assert.equal(v.spf.result, 'fail', v.header);
    assert.deepEqual(asked.filter((q) => q.startsWith('AAAA ')), []);
  });

  test(`past the RFC's limits: permerror, and no question past the bound (${SPF_LIMITS.terms} terms; ${SPF_LIMITS.namesPerTerm} names a term)`, async () => {
    const terms = await verdict('192.0.2.7', 'eleven-terms.evil.test');
    assert.equal(terms.v.spf.result, 'permerror', terms.v.header);
    assert.ok(terms.spf.length <= RFC_BOUND, `${terms.spf.length} questions for SPF`);
    const hosts = await verdict('192.0.2.7', 'eleven-hosts.evil.test');
    assert.equal(hosts.v.spf.result, 'permerror', hosts.v.header);
    assert.ok(hosts.spf.length <= RFC_BOUND, `${hosts.spf.length} questions for SPF`);
  });
});

test('a DNS server that never answers: temperror within the budget, few questions', async () => {
  // a UDP socket that reads and never answers: every question times out
  const { createSocket } = await import('node:dgram');
  const sock = createSocket('udp4');
  let got = 0;
  sock.on('message', () => got++);
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  try {
    const t: AuthTask = { ...task(`127.0.0.1:${sock.address().port}`, '192.0.2.7', 'a@ten.evil.test'), budgetMs: 1500, queryTimeoutMs: 500 };
    const v = await authenticateMessage(message('ten.evil.test'), t);
    assert.equal(v.spf.result, 'temperror', v.header);
    assert.ok(got <= 5, `${got} questions`);
  } finally {
    sock.close();
  }
});

test("loading the verdicts' module loads mailauth's checks without BIMI's stack (issue 34)", () => {
  const root = resolve(import.meta.dirname, '../..');
  // a fresh process: load the module, compute one verdict (no DNS server: temperror), list the packages loaded
  const script = `
    import { createRequire } from 'node:module';
    const { authenticateMessage } = await import('./src/derive/authenticate.ts');
    await authenticateMessage(Buffer.from('From: <a@b.test>\\r\\n\\r\\nbody\\r\\n'), { envelope: { clientIp: '192.0.2.7', helo: 'h.test', mailFrom: 'a@b.test' }, dnsServers: ['127.0.0.1:1'], authservId: 'ephemail.test', budgetMs: 500, queryTimeoutMs: 200 });
    const files = Object.keys(createRequire(import.meta.url).cache);
    const packages = new Set(files.flatMap((f) => [...f.matchAll(/node_modules\\/((?:@[^/]+\\/)?[^/]+)/g)].map((m) => m[1])));
    console.log(JSON.stringify({ packages: [...packages].sort(), files: files.filter((f) => f.includes('/mailauth/')).map((f) => f.slice(f.indexOf('/mailauth/'))) }));
  `;
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', env: { ...process.env, EPHEMAIL_DNS_SERVERS: '127.0.0.1:1' } });
  assert.equal(out.status, 0, out.stderr);
  const { packages, files } = JSON.parse(out.stdout.trim().split('\n').pop()!) as { packages: string[]; files: string[] };
  assert.ok(packages.includes('mailauth'), `mailauth is loaded (${packages.join(', ')})`);
  assert.ok(files.some((f) => f.includes('/lib/spf/')) && files.some((f) => f.includes('/lib/dkim/')), 'its checks are');
  for (const bimi of ['undici', '@postalsys/vmc', 'asn1js', 'fast-xml-parser']) assert.ok(!packages.includes(bimi), `${bimi} is not loaded`);
  assert.deepEqual(files.filter((f) => f.includes('/lib/bimi/') || f.endsWith('/lib/mailauth.js')), [], "neither BIMI's module nor mailauth's main entry is loaded");
});
