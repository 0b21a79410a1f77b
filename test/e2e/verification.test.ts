// The labelled verification set (test/fixtures/verification/, labels.json) over real SMTP → HTTP
// and MCP: every labelled code and main action link right, zero false codes. Prints precision and
// recall of codes and of action links (docs/extraction.md quotes them).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { connectClient } from '../mcp/helpers.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw, toWire } from '../helpers/smtp.ts';

const DIR = resolve(import.meta.dirname, '../fixtures/verification');
const labels = JSON.parse(readFileSync(join(DIR, 'labels.json'), 'utf8')) as Record<string, { codes: string[]; action: { url: string; kind: string } | null }>;
const ACTION = new Set(['verify', 'reset_password', 'login']);

let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' });
});
after(() => svc.stop());

interface Score { tp: number; fp: number; fn: number }
const rate = (s: Score) => ({ precision: s.tp + s.fp === 0 ? 1 : s.tp / (s.tp + s.fp), recall: s.tp + s.fn === 0 ? 1 : s.tp / (s.tp + s.fn) });

test('the labelled set: every code and action link right over HTTP and MCP, zero false codes', { timeout: 180_000 }, async (t) => {
  const files = Object.keys(labels);
  assert.ok(files.length >= 60, `${files.length} labelled messages`);
  assert.ok(files.filter((f) => labels[f].codes.length === 0 && !labels[f].action).length >= 20, 'at least 20 negatives');
  const addressOf = (i: number) => `verify${String(i).padStart(2, '0')}@ephemail.test`;
  for (const [i, f] of files.entries()) {
    const r = await sendRaw(svc.smtpPort, { from: 'sender@fixtures.example', to: [addressOf(i)], body: toWire(readFileSync(join(DIR, f))) });
    assert.equal(r.data?.code, 250, `${f}: ${r.data?.text}`);
  }
  const { client } = await connectClient(svc);
  const codes: Score = { tp: 0, fp: 0, fn: 0 };
  const links: Score = { tp: 0, fp: 0, fn: 0 };
  const wrong: string[] = [];
  try {
    for (const [i, f] of files.entries()) {
      const expected = labels[f];
      const [summary] = (await (await svc.api(`/api/v1/inboxes/${addressOf(i)}/emails`)).json()).data;
      const email = (await (await svc.api(`/api/v1/emails/${summary.id}`)).json()).data;
      const viaMcp = (await client.callTool({ name: 'read_email', arguments: { email_id: summary.id } })).structuredContent as { codes: { value: string }[]; links: { url: string; kind: string }[] };
      assert.deepEqual(viaMcp.codes.map((c) => c.value), email.codes.map((c: any) => c.value), `${f}: MCP and HTTP agree on codes`);
      assert.deepEqual(viaMcp.links.map((l) => [l.url, l.kind]), email.links.map((l: any) => [l.url, l.kind]), `${f}: MCP and HTTP agree on links`);
      const best = email.codes[0]?.value;
      if (expected.codes.length === 0) {
        if (best !== undefined) {
          codes.fp++;
          wrong.push(`${f}: false code ${best}`);
        }
      } else if (best === expected.codes[0]) codes.tp++;
      else {
        codes.fn++;
        if (best !== undefined) codes.fp++;
        wrong.push(`${f}: code ${best ?? 'none'}, expected ${expected.codes[0]}`);
      }
      const action = email.links.find((l: any) => ACTION.has(l.kind));
      if (!expected.action) {
        if (action) {
          links.fp++;
          wrong.push(`${f}: false action link ${action.kind} ${action.url}`);
        }
      } else if (action && action.url === expected.action.url && action.kind === expected.action.kind) links.tp++;
      else {
        links.fn++;
        if (action) links.fp++;
        wrong.push(`${f}: action ${action ? `${action.kind} ${action.url}` : 'none'}, expected ${expected.action.kind} ${expected.action.url}`);
      }
    }
  } finally {
    await client.close();
  }
  const c = rate(codes);
  const l = rate(links);
  t.diagnostic(`codes: precision ${(c.precision * 100).toFixed(1)}%, recall ${(c.recall * 100).toFixed(1)}% (${codes.tp} right, ${codes.fp} false, ${codes.fn} missed)`);
  t.diagnostic(`action links: precision ${(l.precision * 100).toFixed(1)}%, recall ${(l.recall * 100).toFixed(1)}% (${links.tp} right, ${links.fp} false, ${links.fn} missed)`);
  assert.deepEqual(wrong, []);
  assert.equal(codes.fp, 0, 'zero false codes');
});
