// Hostile MIME: deep nesting, part floods, broken encodings, unknown charsets,
// attachment size edges, filenames that try to escape; and storage faults answered with 4xx.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createMemoryBus } from '../../src/bus/memory.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { contentDisposition } from '../../src/http/download.ts';
import { safeFilename } from '../../src/derive/mime.ts';
import { parseMessage } from '../../src/derive/views.ts';
import { typedStoreError } from '../../src/store/sqlite/errors.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';
import type { Store } from '../../src/store/store.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { message, sendRaw } from '../helpers/smtp.ts';

const D = 'ephemail.test';
const LIMITS = { maxAttachmentBytes: 5_242_880, maxAttachments: 100 };
const raw = (s: string | Buffer) => (typeof s === 'string' ? Buffer.from(s, 'latin1') : s);

function nested(depth: number, inner: string): string {
  let body = `Content-Type: text/plain; charset=utf-8\r\n\r\n${inner}\r\n`;
  for (let i = depth; i > 0; i--) {
    const b = `b${i}`;
    body = `Content-Type: multipart/mixed; boundary="${b}"\r\n\r\n--${b}\r\n${body}--${b}--\r\n`;
  }
  return `From: a@example.org\r\nTo: n@${D}\r\nSubject: nested ${depth}\r\nMIME-Version: 1.0\r\n${body}`;
}

/** Resolves the promise or fails after `ms` (a "bounded time" check, generous on purpose). */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`not done within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(t);
  }
}

describe('MIME structure', () => {
  test('MIME nested 100 deep parses and keeps the innermost text', async () => {
    const m = await parseMessage(raw(nested(100, 'the deepest words')), LIMITS);
    assert.equal(m.subject, 'nested 100');
    assert.match(m.textBody ?? '', /the deepest words/);
  });

  test('MIME nested 5,000 deep: a defined outcome (headers kept, body as text) in bounded time', async () => {
    const heapBefore = process.memoryUsage().heapUsed;
    const m = await within(30_000, parseMessage(raw(nested(5000, 'far down')), LIMITS));
    assert.equal(m.subject, 'nested 5000');
    assert.equal(typeof m.textBody, 'string');
    assert.ok((m.textBody ?? '').length <= 1024 * 1024);
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 512 * 1024 * 1024);
  });

  test('30,000 parts: bounded time, at most 100 attachments kept', async () => {
    const parts: string[] = [];
    for (let i = 0; i < 30_000; i++) {
      parts.push(`--P\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="f${i}.bin"\r\n\r\nx${i}\r\n`);
    }
    const msg = `From: a@example.org\r\nSubject: flood\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="P"\r\n\r\n${parts.join('')}--P--\r\n`;
    const m = await within(60_000, parseMessage(raw(msg), LIMITS));
    assert.equal(m.subject, 'flood');
    assert.ok(m.attachments.length <= 100, `${m.attachments.length} attachments`);
  });

  test('base64 garbage decodes to something or falls back, never throws', async () => {
    const msg = message({ From: 'a@example.org', Subject: 'garbage', 'MIME-Version': '1.0', 'Content-Type': 'multipart/mixed; boundary="G"' },
      '--G\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!%%%***not base64 at all===\r\nQUJD=D=\r\n' +
      '--G\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="x.pdf"\r\n\r\n@@@@####$$$$\r\n--G--\r\n');
    const m = await parseMessage(raw(msg), LIMITS);
    assert.equal(m.subject, 'garbage');
    assert.equal(typeof m.textBody, 'string');
  });

  test('quoted-printable garbage and an unknown transfer encoding are kept as text', async () => {
    const msg = message({ From: 'a@example.org', Subject: 'qp', 'Content-Transfer-Encoding': 'x-made-up', 'Content-Type': 'text/plain' }, '=ZZ=\r\n=4 hello =E2=82');
    const m = await parseMessage(raw(msg), LIMITS);
    assert.match(m.textBody ?? '', /hello/);
  });

  test('ISO-2022-JP, GBK and a made-up charset decode or fall back without error', async () => {
    const jis = Buffer.from([0x1b, 0x24, 0x42, 0x24, 0x33, 0x24, 0x73, 0x24, 0x4b, 0x24, 0x41, 0x24, 0x4f, 0x1b, 0x28, 0x42]);
    const gbk = Buffer.from([0xd6, 0xd0, 0xce, 0xc4]);
    const head = (cs: string, subj: string) => Buffer.from(`From: a@example.org\r\nSubject: ${subj}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=${cs}\r\n\r\n`, 'latin1');
    const a = await parseMessage(Buffer.concat([head('ISO-2022-JP', '=?ISO-2022-JP?B?GyRCJDMkcyRLJEEkTxsoQg==?='), jis]), LIMITS);
    assert.equal(a.textBody?.trim(), 'こんにちは');
    assert.equal(a.subject, 'こんにちは');
    const b = await parseMessage(Buffer.concat([head('GBK', '=?GBK?B?1tDOxA==?='), gbk]), LIMITS);
    assert.equal(b.textBody?.trim(), '中文');
    assert.equal(b.subject, '中文');
    const c = await parseMessage(Buffer.concat([head('x-made-up-charset-42', '=?x-made-up-charset-42?Q?hello?='), Buffer.from('plain words \xff\xfe', 'latin1')]), LIMITS);
    assert.match(c.textBody ?? '', /plain words/);
    assert.equal(typeof c.subject, 'string');
  });

  test('an empty message and a message of only headers get a defined outcome', async () => {
    const e = await parseMessage(Buffer.alloc(0), LIMITS);
    assert.equal(e.subject, '');
    const h = await parseMessage(raw('Subject: only headers\r\n'), LIMITS);
    assert.equal(h.subject, 'only headers');
  });
});

describe('safeFilename', () => {
  const cases: [string, (s: string) => boolean][] = [
    ['../../etc/passwd', (s) => s === 'passwd'],
    ['..\\..\\windows\\system32\\cmd.exe', (s) => s === 'cmd.exe'],
    ['..', (s) => /^attachment-1\./.test(s)],
    ['a\u0000b.txt', (s) => s === 'ab.txt'],
    ['evil\r\nX-Injected: 1.txt', (s) => !/[\r\n]/.test(s)],
    ['invoice\u202Egpj.exe', (s) => s === 'invoicegpj.exe'],
    ['\u2066x\u2069.pdf', (s) => s === 'x.pdf'],
    ['添付ファイル', (s) => s === '添付ファイル'],
    ['.htaccess', (s) => s === 'htaccess'],
    ['x'.repeat(1000) + '.pdf', (s) => s.length <= 200 && s.endsWith('.pdf')],
  ];
  for (const [input, ok] of cases) {
    test(`safeFilename(${JSON.stringify(input).slice(0, 40)})`, () => {
      const out = safeFilename(input, 'application/pdf', 0);
      assert.ok(ok(out), JSON.stringify(out));
      assert.doesNotMatch(out, /[\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069/\\]/);
      assert.ok(out.length > 0);
    });
  }
});

describe('contentDisposition (RFC 6266)', () => {
  const table: [string, string][] = [
    ['report.pdf', `attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`],
    ['résumé.pdf', `attachment; filename="resume.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`],
    ['添付ファイル', `attachment; filename="attachment"; filename*=UTF-8''%E6%B7%BB%E4%BB%98%E3%83%95%E3%82%A1%E3%82%A4%E3%83%AB`],
    ['請求書.pdf', `attachment; filename="attachment.pdf"; filename*=UTF-8''%E8%AB%8B%E6%B1%82%E6%9B%B8.pdf`],
    ['a"b;c%d\\e.txt', `attachment; filename="a_b_c_d_e.txt"; filename*=UTF-8''a%22b%3Bc%25d%5Ce.txt`],
    ["it's (1).txt", `attachment; filename="it's (1).txt"; filename*=UTF-8''it%27s%20%281%29.txt`],
  ];
  for (const [name, header] of table) {
    test(`contentDisposition(${JSON.stringify(name)})`, () => assert.equal(contentDisposition(name), header));
  }
});

describe('attachments end to end', () => {
  let svc: TestService;
  before(async () => {
    svc = await startService({}, { mounts: [] });
  });
  after(async () => svc.stop());

  async function only(address: string): Promise<any> {
    const list = await (await svc.api(`/api/v1/inboxes/${encodeURIComponent(address)}/emails`)).json();
    assert.equal(list.data.length, 1);
    return (await (await svc.api(`/api/v1/emails/${list.data[0].id}`)).json()).data;
  }

  test('an attachment of exactly 5,242,880 bytes is kept; 5,242,881 is dropped, the rest kept', async () => {
    const to = `sizes@${D}`;
    await svc.send({
      to, subject: 'sizes', text: 'body stays',
      attachments: [
        { filename: 'exact.bin', content: Buffer.alloc(5_242_880, 1) },
        { filename: 'over.bin', content: Buffer.alloc(5_242_881, 2) },
        { filename: 'small.txt', content: 'small' },
      ],
    });
    const email = await only(to);
    assert.equal(email.text_body.trim(), 'body stays');
    assert.deepEqual(email.attachments.map((a: any) => [a.filename, a.size_bytes]), [['exact.bin', 5_242_880], ['small.txt', 5]]);
    const res = await fetch(email.attachments[0].download_url.replace(/^https?:\/\/[^/]+/, svc.http));
    assert.equal(res.status, 200);
    assert.equal((await res.arrayBuffer()).byteLength, 5_242_880);
  });

  test('over SMTP: 5,000-deep nesting and 30,000 parts are acknowledged and stored with their headers', async () => {
    const parts = Array.from({ length: 30_000 }, (_, i) => `--P\r\nContent-Type: text/plain\r\n\r\np${i}\r\n`).join('');
    const flood = `From: a@example.org\r\nSubject: flood\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="P"\r\n\r\n${parts}--P--\r\n`;
    for (const [to, body, subject] of [[`deep@${D}`, nested(5000, 'far down'), 'nested 5000'], [`flood@${D}`, flood, 'flood']] as const) {
      const r = await within(60_000, sendRaw(svc.smtpPort, { from: 'a@example.org', to: [to], body }));
      assert.equal(r.data?.code, 250, r.data?.text);
      const email = await only(to);
      assert.equal(email.subject, subject);
    }
  });

  test('hostile filenames are stored safely and served with RFC 6266 filename*', async () => {
    const to = `names@${D}`;
    const names = ['../../etc/passwd', 'a\u0000b.txt', 'evil\r\nX-Injected: 1.txt', 'invoice\u202Egpj.exe', '添付ファイル', '"quoted";.txt'];
    await svc.send({ to, subject: 'names', text: 'x', attachments: names.map((filename, i) => ({ filename, content: `file ${i}` })) });
    const email = await only(to);
    assert.equal(email.attachments.length, names.length);
    const stored = email.attachments.map((a: any) => a.filename);
    assert.equal(stored[0], 'passwd');
    assert.equal(stored[4], '添付ファイル');
    for (const a of email.attachments) {
      assert.doesNotMatch(a.filename, /[\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069/\\]/, a.filename);
      const res = await fetch(`${svc.http}/api/v1/emails/${email.id}/attachments/${a.id}`);
      assert.equal(res.status, 200);
      const cd = res.headers.get('content-disposition') ?? '';
      assert.match(cd, /^attachment; filename="[\x20-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9!#$&+.^_`|~%-]+$/, cd);
      const star = /filename\*=UTF-8''(.+)$/.exec(cd)![1];
      assert.equal(decodeURIComponent(star), a.filename);
      const ascii = /filename="([^"]*)"/.exec(cd)![1];
      assert.doesNotMatch(ascii, /["\\]/);
      await res.arrayBuffer();
    }
  });

  test('HTML and SVG attachments are always downloads: attachment, nosniff, CSP sandbox', async () => {
    const to = `active@${D}`;
    await svc.send({
      to, subject: 'active content', text: 'x',
      attachments: [
        { filename: 'page.html', content: '<script>alert(document.cookie)</script>', contentType: 'text/html' },
        { filename: 'pic.svg', content: '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>', contentType: 'image/svg+xml' },
        { filename: 'x.xhtml', content: '<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>', contentType: 'application/xhtml+xml' },
      ],
    });
    const email = await only(to);
    assert.equal(email.attachments.length, 3);
    for (const a of email.attachments) {
      const res = await fetch(`${svc.http}/api/v1/emails/${email.id}/attachments/${a.id}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-disposition') ?? '', /^attachment;/);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.match(res.headers.get('content-security-policy') ?? '', /(^|;\s*)sandbox(\s*;|$)/);
      await res.arrayBuffer();
    }
  });
});

describe('storage faults', () => {
  function failingStore(code: string | null): Store {
    const inner = createSqliteStore(':memory:');
    return new Proxy(inner, {
      get(target, prop, recv) {
        if (prop === 'addEmails') {
          return async () => {
            // what the SQLite store throws for a failure with this code (typed: callers never see SQLITE_*)
            throw typedStoreError(Object.assign(new Error(code ? `${code}: simulated` : 'simulated crash'), code ? { code } : {}));
          };
        }
        const v = Reflect.get(target, prop, recv);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  }

  test('the real SQLite store, its write lock held by another connection for over busy_timeout (5 s) → 451, then 250 once free', async () => {
    const svc = await startService({}, { mounts: [] });
    const Database = (await import('better-sqlite3')).default;
    const other = new Database(svc.service.core.config.store.slice('sqlite:'.length));
    try {
      other.exec('BEGIN IMMEDIATE');
      const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`locked@${D}`], body: message({ Subject: 'locked' }, 'x') });
      assert.equal(r.data?.code, 451, r.data?.text);
      other.exec('ROLLBACK');
      const again = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`locked@${D}`], body: message({ Subject: 'free' }, 'x') });
      assert.equal(again.data?.code, 250, again.data?.text);
      const list = await (await svc.api(`/api/v1/inboxes/locked@${D}/emails`)).json();
      assert.deepEqual(list.data.map((e: any) => e.subject), ['free'], 'only the acknowledged message is stored');
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await svc.stop();
    }
  });

  for (const [code, reply] of [['SQLITE_FULL', 452], ['SQLITE_BUSY', 451], ['SQLITE_IOERR', 451], [null, 451]] as const) {
    test(`${code ?? 'an unknown store error'} → ${reply}, never 250`, async () => {
      const store = failingStore(code);
      const svc = await startService({}, { mounts: [], backends: { store, bus: createMemoryBus(), limiter: createMemoryLimiter() } });
      try {
        const r = await sendRaw(svc.smtpPort, { from: 'a@example.org', to: [`fault@${D}`], body: message({ Subject: 'lost?' }, 'x') });
        assert.equal(r.data?.code, reply, r.data?.text);
        assert.match(r.data!.text, new RegExp(`^${String(reply)[0]}\\.3\\.[01] `));
      } finally {
        await svc.stop();
      }
    });
  }
});
