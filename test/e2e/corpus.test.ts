// The real-world corpus (test/fixtures/corpus/README.md "Using it in tests"): all 222 real-world messages go
// in over raw SMTP (CRLF-normalised, dot-stuffed, pipelined on a few connections) and every one is
// served back: 250, exactly one email, a valid full email, clean bodies, sanitized HTML, attachment
// sizes equal to the downloaded bytes, safe filenames.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { SmtpClient, toWire } from '../helpers/smtp.ts';
import { expectFull } from '../helpers/contract.ts';
import { CORPUS, corpusMissing } from '../helpers/corpus.ts';

const rows = (file: string) => {
  const [head, ...lines] = readFileSync(join(CORPUS, file), 'utf8').split('\n').filter(Boolean);
  const cols = head.split('\t');
  return lines.map((l) => Object.fromEntries(l.split('\t').map((v, i) => [cols[i], v])) as Record<string, string>);
};
// Without the corpus every test here is skipped with the reason (and the summary of npm test says so).
const skip = corpusMissing ?? false;
const manifest = corpusMissing ? [] : rows('MANIFEST.tsv');
const props = new Map(corpusMissing ? [] : rows('PROPERTIES.tsv').map((r) => [r.path, r]));

interface Item { path: string; address: string; reply?: { code: number; text: string } }
const items: Item[] = manifest.map((m, i) => ({ path: m.path, address: `corpus${String(i).padStart(3, '0')}@ephemail.test` }));

let svc: TestService;
before(async () => {
  if (corpusMissing) return;
  svc = await startService({
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000',
  });
});
after(() => svc?.stop());

/** One connection sends its share, each transaction pipelined (MAIL+RCPT+DATA in one write). */
async function sendShare(share: Item[]): Promise<void> {
  const { client } = await SmtpClient.open(svc.smtpPort);
  const ehlo = await client.cmd('EHLO corpus.example');
  assert.equal(ehlo.code, 250);
  for (const it of share) {
    const body = toWire(readFileSync(join(CORPUS, it.path)));
    client.write(`MAIL FROM:<corpus@sender.example> BODY=8BITMIME SMTPUTF8\r\nRCPT TO:<${it.address}>\r\nDATA\r\n`);
    const mail = await client.read();
    const rcpt = await client.read();
    const data = await client.read();
    if (mail.code !== 250 || rcpt.code !== 250 || data.code !== 354) {
      it.reply = { code: data.code === 354 ? rcpt.code : data.code, text: `${mail.code} ${rcpt.code} ${data.code}` };
      if (data.code === 354) client.write('.\r\n');
      await client.read().catch(() => undefined);
      continue;
    }
    client.write(Buffer.concat([body, Buffer.from('.\r\n')]));
    const r = await client.read(60_000);
    it.reply = { code: r.code, text: r.text };
  }
  await client.quit();
}

test('all 222 messages are accepted with 250', { skip, timeout: 300_000 }, async () => {
  assert.equal(items.length, 222);
  const shares: Item[][] = [[], [], [], []];
  items.forEach((it, i) => shares[i % shares.length].push(it));
  await Promise.all(shares.map(sendShare));
  const bad = items.filter((it) => it.reply?.code !== 250).map((it) => `${it.path}: ${it.reply?.code} ${it.reply?.text}`);
  assert.deepEqual(bad, [], 'every message got 250');
});

const DANGEROUS = [/<script/i, /<iframe/i, /<object/i, /<embed/i, /<form/i, /<[^>]*\son[a-z]+\s*=/i, /javascript:/i];

test('every message is stored once and served as a valid email', { skip, timeout: 300_000 }, async () => {
  const problems: string[] = [];
  const check = async (it: Item) => {
    const p = props.get(it.path)!;
    const where = it.path;
    try {
      const listRes = await svc.api(`/api/v1/inboxes/${it.address}/emails`);
      assert.equal(listRes.status, 200, `${where}: list`);
      const list = (await listRes.json()).data;
      assert.equal(list.length, 1, `${where}: exactly one email`);
      const res = await svc.api(`/api/v1/emails/${list[0].id}`);
      const text = await res.text();
      assert.equal(res.status, 200, `${where}: GET email ${text.slice(0, 200)}`);
      const e = JSON.parse(text).data;
      expectFull(e);
      assert.equal(e.address, it.address);
      assert.equal(e.mailed_by, 'sender.example');
      assert.deepEqual({ ...list[0] }, Object.fromEntries(Object.keys(list[0]).map((k) => [k, e[k]])), `${where}: summary matches the full email`);
      for (const field of ['sender', 'subject', 'to', 'cc', 'text_body', 'html_body'] as const) {
        const v = e[field];
        if (v === null) continue;
        assert.equal(typeof v, 'string', `${where}: ${field}`);
        assert.ok(!v.includes('\u0000'), `${where}: ${field} has no NUL`);
        assert.ok(v.isWellFormed(), `${where}: ${field} is valid Unicode`);
      }
      for (const field of ['sender', 'subject', 'to', 'cc'] as const) assert.doesNotMatch(e[field], /[\r\n]/, `${where}: ${field} is one line`);
      // sender/subject are "" exactly when the parsed headers hold no From/Subject (PROPERTIES.tsv's
      // has_from/has_subject is a plain line match; a parser also finds e.g. a From after a BOM)
      const names = new Set(e.headers.map((h: any) => h.name.toLowerCase()));
      if (!names.has('from')) assert.equal(e.sender, '', `${where}: no From → ""`);
      if (!names.has('subject')) assert.equal(e.subject, '', `${where}: no Subject → ""`);
      if (p.has_from === 'no' && names.has('from')) assert.ok(e.sender.length > 0);
      if (p.top_content_type === 'text/plain' || p.top_content_type === 'text/html') {
        assert.ok(e.text_body !== null || e.html_body !== null, `${where}: a text part gives a body`);
      }
      if (p.top_content_type === 'text/html') assert.equal(e.text_body, null, `${where}: HTML-only has text_body null`);
      if (e.html_body !== null) for (const re of DANGEROUS) assert.doesNotMatch(e.html_body, re, `${where}: html_body ${re}`);
      for (const a of e.attachments) {
        assert.equal(typeof a.filename, 'string');
        assert.ok(a.filename.length > 0, `${where}: filename non-empty`);
        assert.doesNotMatch(a.filename, /[/\\\u0000-\u001f]/, `${where}: filename ${JSON.stringify(a.filename)} is safe`);
        assert.ok(!a.filename.split(/[/\\]/).includes('..'), `${where}: no .. in filename`);
        assert.ok(a.filename.isWellFormed());
        const dl = await fetch(a.download_url.replace(/^https?:\/\/[^/]+/, svc.http));
        assert.equal(dl.status, 200, `${where}: download ${a.filename}`);
        const bytes = Buffer.from(await dl.arrayBuffer());
        assert.equal(bytes.length, a.size_bytes, `${where}: ${a.filename} size_bytes equals downloaded bytes`);
        assert.match(dl.headers.get('content-disposition') ?? '', /^attachment/);
      }
      const al = await svc.api(`/api/v1/emails/${e.id}/attachments`);
      assert.deepEqual((await al.json()).data, e.attachments, `${where}: attachment list agrees`);
      if (it.path === 'eml-viewer/xss.eml') assert.match(e.html_body, /safe-marker/, 'xss.eml keeps its safe paragraph');
      if (it.path === 'enmime/epilogue-sample.raw') {
        assert.doesNotMatch(`${e.text_body ?? ''}${e.html_body ?? ''}`, /Potentially malicious content/, 'the epilogue is not body');
      }
    } catch (err) {
      problems.push(err instanceof Error ? err.message.split('\n')[0] : String(err));
    }
  };
  // a few at a time: the service, not the test, should be the bottleneck
  const queue = [...items];
  await Promise.all(Array.from({ length: 6 }, async () => {
    for (let it = queue.shift(); it; it = queue.shift()) await check(it);
  }));
  assert.deepEqual(problems, []);
});

test('every message comes back byte for byte from /raw (the bytes after DATA, dot-stuffing undone)', { skip, timeout: 300_000 }, async () => {
  const problems: string[] = [];
  const queue = [...items];
  await Promise.all(Array.from({ length: 6 }, async () => {
    for (let it = queue.shift(); it; it = queue.shift()) {
      const [summary] = (await (await svc.api(`/api/v1/inboxes/${it.address}/emails`)).json()).data;
      const email = (await (await svc.api(`/api/v1/emails/${summary.id}`)).json()).data;
      const res = await fetch(email.raw_url.replace(/^https?:\/\/[^/]+/, svc.http));
      const got = Buffer.from(await res.arrayBuffer());
      const sent = Buffer.from(toWire(readFileSync(join(CORPUS, it.path))).toString('latin1').replace(/^\.\./gm, '.'), 'latin1');
      if (res.status !== 200) problems.push(`${it.path}: /raw ${res.status}`);
      else if (!got.equals(sent)) problems.push(`${it.path}: /raw differs (${got.length} bytes, sent ${sent.length})`);
      else if (res.headers.get('content-type') !== 'message/rfc822' || res.headers.get('content-disposition') !== `attachment; filename="${summary.id}.eml"`
        || res.headers.get('x-content-type-options') !== 'nosniff' || res.headers.get('content-security-policy') !== 'sandbox') {
        problems.push(`${it.path}: /raw headers ${JSON.stringify(Object.fromEntries(res.headers))}`);
      }
    }
  }));
  assert.deepEqual(problems, []);
});

test('the service still answers after the corpus', { skip }, async () => {
  const res = await svc.api('/api/v1/health');
  assert.equal(res.status, 200);
  assert.equal((await res.json()).data.status, 'ok');
});
