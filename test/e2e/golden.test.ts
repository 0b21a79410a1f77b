// Golden tests: test/fixtures/mail/*.eml go in over real SMTP and come out of the API as the
// reviewed JSON next to them (<name>.json). A change in parsing, decoding or sanitizing shows up
// as a diff. Regenerate after a deliberate change with EPHEMAIL_UPDATE_GOLDEN=1, then review.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { startService, type TestService } from '../helpers/service.ts';
import { sendRaw } from '../helpers/smtp.ts';
import { listAll } from '../helpers/contract.ts';

const DIR = resolve(import.meta.dirname, '../fixtures/mail');
const UPDATE = process.env.EPHEMAIL_UPDATE_GOLDEN === '1';
/** Fixtures whose envelope sender is the null sender `<>` (bounces). */
const NULL_SENDER = new Set(['bounce-null-sender.eml']);

let svc: TestService;
before(async () => (svc = await startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '10000' })));
after(() => svc.stop());

for (const [i, name] of readdirSync(DIR).filter((f) => f.endsWith('.eml')).sort().entries()) {
  test(`golden: ${name}`, async () => {
    const address = `golden${i}@ephemail.test`;
    const r = await sendRaw(svc.smtpPort, { from: NULL_SENDER.has(name) ? '' : 'fixture@Sender.Example', to: [address], body: readFileSync(join(DIR, name)) });
    assert.equal(r.data?.code, 250, r.data?.text);
    const [summary] = await listAll(svc.api, address);
    const e = (await (await svc.api(`/api/v1/emails/${summary.id}`)).json()).data;
    const attachments = [];
    for (const a of e.attachments) {
      const bytes = Buffer.from(await (await fetch(a.download_url.replace(/^https?:\/\/[^/]+/, svc.http))).arrayBuffer());
      assert.equal(bytes.length, a.size_bytes);
      attachments.push({ filename: a.filename, content_type: a.content_type, size_bytes: a.size_bytes, sha256_prefix: (await import('node:crypto')).createHash('sha256').update(bytes).digest('hex').slice(0, 16) });
    }
    const got = {
      sender: e.sender, mailed_by: e.mailed_by, subject: e.subject, to: e.to, cc: e.cc, message_id: e.message_id,
      has_attachments: e.has_attachments, text_body: e.text_body, html_body: e.html_body, attachments,
      header_names: e.headers.map((h: any) => h.name),
    };
    const goldenPath = join(DIR, name.replace(/\.eml$/, '.json'));
    if (UPDATE || !existsSync(goldenPath)) {
      writeFileSync(goldenPath, `${JSON.stringify(got, null, 2)}\n`);
      if (!UPDATE) assert.fail(`no golden file for ${name}: wrote ${goldenPath}; review it and commit`);
      return;
    }
    assert.deepEqual(got, JSON.parse(readFileSync(goldenPath, 'utf8')));
  });
}
