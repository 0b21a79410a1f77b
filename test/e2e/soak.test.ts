// The real process (bin/ephemail.js serve, as `npm start` runs it) under mixed traffic for a while:
// SMTP in (multipart/alternative with HTML and an attachment, and the real-world fixtures), the
// list, one email in full, its raw source, MCP tool calls with the official SDK client, and the
// pages. It must answer every request correctly all along and be alive at the end with every
// message stored. better-sqlite3 12 aborted here on Node 24 within seconds (SIGABRT in a statement's
// destructor); CI runs this on Node 24 and on Node 22. EPHEMAIL_SOAK_SECONDS sets how long (60 by
// default; the release check runs it for 600).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import nodemailer from 'nodemailer';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawnServe, type Served } from '../helpers/serve.ts';

const SECONDS = Number(process.env.EPHEMAIL_SOAK_SECONDS || 60);
const FIXTURES = resolve(import.meta.dirname, '../fixtures/mail');
const fixtures = readdirSync(FIXTURES).filter((f) => f.endsWith('.eml')).map((f) => readFileSync(join(FIXTURES, f)));

let svc: Served;
before(async () => {
  svc = await spawnServe({
    EPHEMAIL_LOG_LEVEL: 'info',
    EPHEMAIL_LIMIT_ANON_PER_MINUTE: '1000000',
    EPHEMAIL_LIMIT_ANON_PER_DAY: '10000000',
    EPHEMAIL_LIMIT_KEY_PER_MINUTE: '1000000',
    EPHEMAIL_LIMIT_KEY_PER_DAY: '10000000',
  }, { tempSqlite: 'soak.db' });
});
after(() => svc?.stop());

function html(n: number): string {
  const rows = Array.from({ length: 30 }, (_, i) => `<tr><td style="padding:4px">Item ${i}</td><td><a href="https://shop.example/p/${n}/${i}">view</a></td></tr>`).join('');
  return `<!doctype html><html><body><h1>Newsletter ${n}</h1><p>Your verification code is <b>${String(100000 + n).slice(-6)}</b>.</p><table>${rows}</table><img src="https://img.example/${n}.png"></body></html>`;
}

test(`the real process serves mixed traffic for ${SECONDS} s without a crash (${process.version})`, { timeout: (SECONDS + 120) * 1000 }, async (t) => {
  let exit: string | null = null;
  svc.child.once('exit', (code, signal) => (exit = `exited ${code ?? signal}`));
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: svc.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 2 });
  const mcp = new Client({ name: 'soak', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${svc.http}/mcp`)));
  const get = async (path: string, expect = 200): Promise<Response> => {
    const res = await fetch(`${svc.http}${path}`);
    assert.equal(res.status, expect, `${path} → ${res.status}: ${res.status === expect ? '' : await res.text()}`);
    return res;
  };

  const deadline = Date.now() + SECONDS * 1000;
  const sent = new Map<string, number>();
  let rounds = 0;
  let pages = 0;
  let lastPage = 0;
  try {
    while (Date.now() < deadline) {
      assert.equal(exit, null, `the service is alive (${exit}): ${svc.output().slice(-3000)}`);
      const address = `soak${rounds % 25}@ephemail.test`;
      // SMTP in: a generated multipart/alternative with an attachment, and a real-world fixture
      await transport.sendMail({
        from: 'News <news@shop.example>',
        to: address,
        subject: `Newsletter ${rounds}`,
        text: `Newsletter ${rounds}: your code is ${String(100000 + rounds).slice(-6)}`,
        html: html(rounds),
        attachments: [{ filename: `invoice-${rounds}.pdf`, content: Buffer.alloc(20_000 + (rounds % 7) * 1000, rounds % 251) }],
      });
      await transport.sendMail({ envelope: { from: 'fixture@sender.example', to: [address] }, raw: fixtures[rounds % fixtures.length] });
      sent.set(address, (sent.get(address) ?? 0) + 2);

      // the API: list, one in full, its raw source
      const list = (await (await get(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=5`)).json()).data;
      assert.ok(list.length >= 1, 'the list holds the mail just sent');
      const full = (await (await get(`/api/v1/emails/${list[0].id}`)).json()).data;
      assert.equal(full.id, list[0].id);
      const raw = await (await get(`/api/v1/emails/${list[0].id}/raw`)).arrayBuffer();
      assert.ok(raw.byteLength > 100, 'the raw source');

      // MCP: check_inbox and read_email through the official SDK client
      const checked = await mcp.callTool({ name: 'check_inbox', arguments: { address } });
      assert.notEqual(checked.isError, true, JSON.stringify(checked));
      const read = await mcp.callTool({ name: 'read_email', arguments: { email_id: list[0].id } });
      assert.notEqual(read.isError, true, JSON.stringify(read));

      // the pages, once a second: they count in the IP's own web bucket (300 a minute), which mixed
      // traffic from one address must not exhaust
      if (Date.now() - lastPage >= 1000) {
        lastPage = Date.now();
        await (await get('/')).text();
        const page = await (await get(`/inbox/${encodeURIComponent(address)}`)).text();
        assert.match(page, /<html/i);
        pages++;
      }
      rounds++;
    }

    // everything acknowledged is there, and the process is alive and healthy at the end
    for (const [address, n] of sent) {
      const res = await get(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100`);
      const got = (await res.json()).data.length;
      assert.equal(got, Math.min(n, 100), `${address}: ${got} of ${n} listed`);
    }
    assert.deepEqual((await (await get('/api/v1/health')).json()).data, { status: 'ok', database: 'connected', smtp: 'running' });
    assert.equal(exit, null, `the service is alive at the end (${exit})`);
    t.diagnostic(`${rounds} rounds: ${rounds * 2} messages in, ${rounds * 5} API and MCP requests, ${pages * 2} pages (${process.version})`);
    assert.ok(pages >= Math.min(SECONDS, 10) / 2, `pages kept loading (${pages})`);
    assert.ok(rounds >= Math.min(SECONDS, 20), `traffic kept flowing (${rounds} rounds in ${SECONDS} s)`);
  } finally {
    transport.close();
    await mcp.close().catch(() => {});
  }
});
