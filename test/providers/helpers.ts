// What every provider test shares: a running service, the message each SDK sends (text, HTML, two
// attachments, cc and bcc), and the checks through /api/v1 that it landed in each inbox as sent.
import assert from 'node:assert/strict';
import type { AssembleOptions } from '../../src/assemble.ts';
import { startService, type TestService } from '../helpers/service.ts';

export type { TestService };

/** A service whose anonymous bucket does not get in the way (the 429 tests start their own). */
export function startProviderService(env: Record<string, string> = {}, options: AssembleOptions = {}): Promise<TestService> {
  return startService({ EPHEMAIL_LIMIT_ANON_PER_MINUTE: '100000', EPHEMAIL_LIMIT_ANON_PER_DAY: '1000000', ...env }, options);
}

/** Two attachments with bytes that are not text (a PNG header, a PDF with a high byte). */
export const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
export const PDF = Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\nfake pdf\n', 'latin1');
export const TEXT = 'Hello from the provider test.\nYour code is in the HTML too.';
export const HTML = '<p>Hello from the <b>provider</b> test.</p>';

let counter = 0;
/** Fresh addresses for one test: to, cc, bcc at the served domain, a sender elsewhere. */
export function addresses(tag: string) {
  const n = `${tag}-${process.pid}-${++counter}`;
  return { to: `to-${n}@ephemail.test`, cc: `cc-${n}@ephemail.test`, bcc: `bcc-${n}@ephemail.test`, from: `app-${n}@sender.example` };
}

export async function inbox(svc: TestService, address: string): Promise<any[]> {
  const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails?limit=100`);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).data;
}

export async function fullEmail(svc: TestService, id: string): Promise<any> {
  const res = await svc.api(`/api/v1/emails/${id}`);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).data;
}

/**
 * The message landed once in each of to, cc and bcc: subject, sender, bodies, attachments (bytes,
 * names, types) right; no Bcc header; mailed_by the From domain. Returns the email of `to`.
 */
export async function assertDelivered(svc: TestService, a: ReturnType<typeof addresses>, subject: string, opts: { attachments?: boolean; provider?: RegExp } = {}): Promise<any> {
  let first: any = null;
  for (const address of [a.to, a.cc, a.bcc]) {
    const list = await inbox(svc, address);
    assert.equal(list.length, 1, `one email for ${address}`);
    const email = await fullEmail(svc, list[0].id);
    assert.equal(email.subject, subject);
    assert.match(email.sender, new RegExp(a.from.replace(/[.+]/g, '\\$&')));
    assert.equal(email.mailed_by, 'sender.example');
    assert.equal(email.text_body?.trim(), TEXT);
    assert.match(email.html_body ?? '', /Hello from the <b>provider<\/b> test\./);
    const raw = await rawOf(svc, email.id);
    assert.doesNotMatch(raw, /^Bcc:/im, 'no Bcc header');
    assert.doesNotMatch(raw, new RegExp(a.bcc.replace(/[.+]/g, '\\$&')), 'the bcc address is not in the message');
    assert.match(raw, /^Received: .*ephemail.*emulation/im, 'a Received trace names the emulation');
    if (opts.provider) assert.match(raw, opts.provider);
    if (opts.attachments !== false) {
      const atts = email.attachments.map((x: any) => ({ filename: x.filename, content_type: x.content_type.split(';')[0] }));
      assert.deepEqual(atts, [{ filename: 'pixel.png', content_type: 'image/png' }, { filename: 'report.pdf', content_type: 'application/pdf' }]);
      for (const [i, att] of email.attachments.entries()) {
        const url = att.download_url.replace(/^https?:\/\/[^/]+/, svc.http);
        const bytes = Buffer.from(await (await fetch(url)).arrayBuffer());
        assert.deepEqual(bytes, i === 0 ? PNG : PDF, `bytes of ${att.filename}`);
      }
    }
    first ??= email;
  }
  return first;
}

/** The raw message with its header lines unfolded. */
export async function rawOf(svc: TestService, id: string): Promise<string> {
  return (await (await svc.api(`/api/v1/emails/${id}/raw`)).text()).replace(/\r\n[ \t]+/g, ' ');
}

/** Nothing was stored for these addresses. */
export async function assertNothingStored(svc: TestService, ...list: string[]): Promise<void> {
  for (const address of list) assert.deepEqual(await inbox(svc, address), [], `nothing stored for ${address}`);
}

/** The code a test puts into template data is found by GET /latest. */
export async function assertTemplateCode(svc: TestService, address: string, code: string): Promise<void> {
  const res = await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/latest`);
  assert.equal(res.status, 200, await res.clone().text());
  const email = (await res.json()).data;
  assert.ok(email.codes.map((c: any) => c.value ?? c).includes(code), `code ${code} found in ${JSON.stringify(email.codes)}`);
}
