// One message must not freeze the process (docs/security.md): the regexes over mail content are
// linear, the HTML is capped before sanitizing (start and end tags), and derivations run off the
// event loop. The worst inputs known: a long `style="height:0;…"` (a quadratic lookahead froze the
// process for 2.6 s at 144 KB), and 1.5 MB of unmatched end tags (6.5 s in the parser).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { htmlToText, isHiddenStyle, sanitizeEmailHtml } from '../../src/domain/html.ts';
import { connectClient } from '../mcp/helpers.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { cpuMs } from '../helpers/time.ts';

const hiddenStyle = (bytes: number) => 'height:0;'.repeat(Math.ceil(bytes / 9));
/** CPU ms of `fn`: a loaded machine stretches wall time, not the work. */
const time = (fn: () => unknown) => cpuMs(fn).ms;

test('the worst style attribute and end-tag flood are handled in linear time', () => {
  for (const kb of [144, 1024]) {
    const style = hiddenStyle(kb * 1024);
    // bound: linear (the quadratic lookahead took 2.6 s at 144 KB); CPU time
    assert.ok(time(() => isHiddenStyle(style)) < 200, `isHiddenStyle on ${kb} KB`);
    const html = `<div style="${style}">hidden words</div><p>visible words</p>`;
    let text = '';
    // bound: linear; CPU time
    assert.ok(time(() => (text = htmlToText(html))) < (kb === 144 ? 1000 : 3000), `htmlToText on a ${kb} KB style`);
    assert.match(text, /visible words/);
  }
  const flood = '</div>'.repeat(250_000); // 1.5 MB
  // bound: the cap before the parser (6.5 s without it); CPU time
  assert.ok(time(() => sanitizeEmailHtml(`<p>x</p>${flood}`)) < 3000, 'sanitize 1.5 MB of unmatched end tags');
  // bound: the cap before the parser; CPU time
  assert.ok(time(() => htmlToText(`<p>x</p>${flood}`)) < 3000, 'htmlToText 1.5 MB of unmatched end tags');
  // still right on ordinary styles
  assert.equal(isHiddenStyle('max-height:0px; overflow:hidden'), true);
  assert.equal(isHiddenStyle('overflow: hidden; height: 0 !important'), true, 'in either order');
  assert.equal(isHiddenStyle('height:0'), false, 'zero height alone can still overflow visibly');
  assert.equal(isHiddenStyle('display:none'), true);
  assert.equal(isHiddenStyle('DISPLAY : NONE !IMPORTANT'), true);
  assert.equal(isHiddenStyle('font-size:1px'), true);
  assert.equal(isHiddenStyle('font-size:12px;color:#333'), false);
  assert.equal(isHiddenStyle('opacity:0'), true);
  assert.equal(isHiddenStyle('opacity:0.5'), false);
});

let svc: TestService;
before(async () => {
  svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000' });
});
after(() => svc.stop());

test('the worst message over SMTP: read_email and GET /emails/{id} answer within 10 s, health within 1 s throughout', { timeout: 120_000 }, async () => {
  const html = `<html><body><div style="${hiddenStyle(1024 * 1024)}">hidden</div><p>Your code is 559120</p>${'</div>'.repeat(250_000)}</body></html>`;
  const body = [
    'From: attacker@example.org', 'To: freeze@ephemail.test', 'Subject: worst case', 'MIME-Version: 1.0',
    'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 8bit', '', html.replace(/(.{900})/g, '$1\r\n'), '',
  ].join('\r\n');
  const sent = await sendRaw(svc.smtpPort, { from: 'attacker@example.org', to: ['freeze@ephemail.test'], body });
  assert.equal(sent.data?.code, 250, sent.data?.text);
  const [summary] = (await (await svc.api('/api/v1/inboxes/freeze@ephemail.test/emails')).json()).data;

  let worstHealth = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const t0 = performance.now();
      const res = await svc.api('/api/v1/health');
      await res.arrayBuffer();
      worstHealth = Math.max(worstHealth, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50)); // slow on purpose: the health prober's pace
    }
  })();
  const { client } = await connectClient(svc);
  try {
    const t0 = performance.now();
    const [viaApi, viaMcp] = await Promise.all([
      svc.api(`/api/v1/emails/${summary.id}`).then(async (r) => ({ status: r.status, ms: performance.now() - t0, body: await r.json() })),
      client.callTool({ name: 'read_email', arguments: { email_id: summary.id } }).then((r) => ({ r, ms: performance.now() - t0 })),
    ]);
    assert.equal(viaApi.status, 200);
    // bound: answered, not frozen by the hostile message; one-sided, generous
    assert.ok(viaApi.ms < 10_000, `GET answered in ${viaApi.ms.toFixed(0)} ms`);
    // bound: answered, not frozen by the hostile message; one-sided, generous
    assert.ok(viaMcp.ms < 10_000, `read_email answered in ${viaMcp.ms.toFixed(0)} ms`);
    assert.notEqual(viaMcp.r.isError, true);
    assert.match(JSON.stringify(viaMcp.r.structuredContent ?? viaMcp.r.content), /559120/, 'the visible words survive');
  } finally {
    polling = false;
    await poller;
    await client.close();
  }
  // bound: the event loop is never frozen long (it is the behaviour); one-sided
  assert.ok(worstHealth < 1000, `health answered within ${worstHealth.toFixed(0)} ms at worst`);
});
