// The web routes without a browser (inject): statuses, headers, canonical paths, the web bucket,
// the cid matching rule and the frame document.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { attachmentForCid, frameDocument } from '../../src/web/frame.ts';
import { hasRemoteContent, humanSize } from '../../src/web/pages.ts';
import { WEB_LIMITS } from '../../src/web/security.ts';
import { startService, type TestService } from '../helpers/service.ts';
import { cpuMs, midMinuteClock } from '../helpers/time.ts';

let svc: TestService;
before(async () => {
  svc = await startService();
});
after(() => svc.stop());

const inject = (url: string, ip = '127.0.0.1') => svc.service.app.inject({ method: 'GET', url, remoteAddress: ip });

test('pages answer with HTML, their CSP and no caching; bad addresses get a page, not JSON', async () => {
  for (const [url, status] of [['/', 200], ['/inbox/Mixed.Case@EPHEMAIL.test', 200], ['/inbox/nope', 400], ['/inbox/a@elsewhere.test', 404], ['/inbox/a@ephemail.test/not-an-id', 404]] as const) {
    const res = await inject(url);
    assert.equal(res.statusCode, status, url);
    assert.match(res.headers['content-type'] as string, /^text\/html/, url);
    assert.match(res.headers['content-security-policy'] as string, /^default-src 'none'; script-src \S+\/web\/assets\//, url);
    assert.equal(res.headers['cache-control'], 'no-store');
  }
  assert.equal((await inject('/')).headers['x-robots-tag'], undefined);
  assert.equal((await inject('/inbox/a@ephemail.test')).headers['x-robots-tag'], 'noindex, nofollow, noarchive');
  const head = await svc.service.app.inject({ method: 'HEAD', url: '/api/v1/inboxes/a@ephemail.test/events', headers: { 'sec-fetch-site': 'same-origin' } });
  assert.equal(head.statusCode, 200, 'HEAD on a stream answers at once');
  const mixed = await inject('/inbox/Mixed.Case@EPHEMAIL.test');
  assert.match(mixed.body, /<h1 id="address" class="address">mixed\.case@ephemail\.test<\/h1>/);
  const xss = await inject(`/inbox/${encodeURIComponent('"><script>x</script>@ephemail.test')}`);
  assert.equal(xss.statusCode, 400);
  assert.doesNotMatch(xss.body, /<script>x/);
});

test('/open takes a name or an address to its inbox', async () => {
  const a = await inject('/open?address=Alice');
  assert.equal(a.statusCode, 303);
  assert.equal(a.headers.location, '/inbox/alice@ephemail.test');
  const b = await inject(`/open?address=${encodeURIComponent(' b+tag@ephemail.test ')}`);
  assert.equal(b.headers.location, '/inbox/b%2Btag@ephemail.test');
  assert.equal((await inject('/open?address=')).statusCode, 400);
});

test('an email path under another inbox redirects to the email\'s own; the frame serves its body', async () => {
  await svc.send({ to: 'owner@ephemail.test', subject: 'canon', html: '<p>hello <img src="cid:pic.png@host"></p>', attachments: [{ filename: 'pic.png', content: Buffer.from([137, 80, 78, 71]), contentType: 'image/png', cid: 'pic.png@host' }] });
  const { data } = await (await svc.api('/api/v1/inboxes/owner@ephemail.test/emails')).json();
  const id = data[0].id as string;
  const r = await inject(`/inbox/someone@ephemail.test/${id.toUpperCase()}`);
  assert.equal(r.statusCode, 301);
  assert.equal(r.headers.location, `/inbox/owner@ephemail.test/${id}`);
  const page = await inject(`/inbox/owner@ephemail.test/${id}`);
  assert.equal(page.statusCode, 200);
  assert.doesNotMatch(page.body, /load-images/, 'no remote-images button when nothing is remote');
  const frame = await inject(`/web/frames/${id}`);
  assert.equal(frame.statusCode, 200);
  assert.match(frame.body, /<img src="\/web\/frames\/[0-9a-f-]+\/cid\/[^"]+"/);
  const src = /<img src="([^"]+)"/.exec(frame.body)![1];
  const img = await inject(src);
  assert.equal(img.statusCode, 200);
  assert.equal(img.headers['content-type'], 'image/png');
  assert.equal(img.headers['x-content-type-options'], 'nosniff');
  assert.equal((await inject('/web/frames/01a20000-0000-7000-8000-000000000000')).statusCode, 404);
});

test('assets are content-addressed and cached for a year; unknown ones 404', async () => {
  const home = await inject('/');
  const js = /<script src="([^"]+)"/.exec(home.body)![1];
  const css = /<link rel="stylesheet" href="([^"]+)"/.exec(home.body)![1];
  for (const url of [js, css]) {
    const res = await inject(url);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.ok(res.rawPayload.length < 60 * 1024, `${url} is small (${res.rawPayload.length} bytes)`);
  }
  assert.equal((await inject('/web/assets/app.js')).statusCode, 404);
  // the entry module imports its siblings by their hashed names: each served, cached and small too
  const entry = (await inject(js)).body;
  const imports = [...entry.matchAll(/from '\.\/([a-z]+\.[0-9a-f]{10}\.js)'/g)].map((m) => `/web/assets/${m[1]}`);
  assert.ok(imports.length >= 3, `app.js imports its view modules by hash (${imports.join(', ')})`);
  for (const url of imports) {
    const res = await inject(url);
    assert.equal(res.statusCode, 200, url);
    assert.match(res.headers['content-type'] as string, /^text\/javascript/);
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.doesNotMatch(res.body, /from '\.\/[a-z]+\.js'/, 'no unhashed import is left');
  }
});

test(`web routes count in their own per-IP bucket (${WEB_LIMITS.perMinute}/min), apart from the API quota`, async () => {
  // a mid-minute clock: the bucket's minute cannot turn between spending it and the checks (a
  // straddle reset it and the 301st page answered 200)
  const own = await startService({}, { clock: midMinuteClock() });
  const page = (url: string, ip: string) => own.service.app.inject({ method: 'GET', url, remoteAddress: ip });
  try {
    const ip = '203.0.113.9';
    for (let i = 0; i < WEB_LIMITS.perMinute; i++) assert.equal((await page('/', ip)).statusCode, 200);
    const over = await page('/', ip);
    assert.equal(over.statusCode, 429);
    assert.match(over.headers['content-type'] as string, /^text\/html/);
    assert.ok(Number(over.headers['retry-after']) >= 1);
    // the API quota of that IP is untouched
    const api = await own.service.app.inject({ method: 'GET', url: '/api/v1/domains', remoteAddress: ip });
    assert.equal(api.statusCode, 200);
    assert.equal(api.headers['ratelimit-remaining'], String(own.service.core.config.anon.perMinute - 1));
    // another IP is unaffected
    assert.equal((await page('/', '203.0.113.10')).statusCode, 200);
  } finally {
    await own.stop();
  }
});

test('cid references match attachments by file name; SVG never counts as an inline image', () => {
  const atts = [
    { id: '1', filename: 'logo.png', contentType: 'image/png', sizeBytes: 1, contentId: null },
    { id: '2', filename: 'Photo.JPG', contentType: 'image/jpeg', sizeBytes: 1, contentId: null },
    { id: '3', filename: 'vector.svg', contentType: 'image/svg+xml', sizeBytes: 1, contentId: null },
  ];
  assert.equal(attachmentForCid('logo.png', atts)?.id, '1');
  assert.equal(attachmentForCid('photo.jpg@01D9.ABC', atts)?.id, '2');
  assert.equal(attachmentForCid('<logo.png>', atts)?.id, '1');
  assert.equal(attachmentForCid('vector.svg', atts), undefined);
  assert.equal(attachmentForCid('unknown@x', atts), undefined);
  // by Content-ID first: Gmail names inline parts ii_<random>, unrelated to the file name
  const gmail = [{ id: '1', filename: 'image.png', contentType: 'image/png', sizeBytes: 1, contentId: 'ii_lx9k2f3a0' }];
  assert.equal(attachmentForCid('ii_lx9k2f3a0', gmail)?.id, '1');
  assert.equal(attachmentForCid('<ii_lx9k2f3a0>', gmail)?.id, '1');
  assert.equal(attachmentForCid('ii_other', gmail), undefined);
  const doc = frameDocument({ id: 'e', htmlBody: '<img src="cid:nothing"><img src="cid:logo.png">', attachments: atts } as any);
  assert.match(doc, /<img src="about:blank"><img src="\/web\/frames\/e\/cid\/1">/);
  assert.match(doc, /<base target="_blank">/);
});

test('remote-content detection and sizes', () => {
  assert.equal(hasRemoteContent('<img src="https://t.example/p.gif">'), true);
  assert.equal(hasRemoteContent('<div style="background:url( //t.example/x)">'), true);
  assert.equal(hasRemoteContent('<table background="http://t.example/b">'), true);
  assert.equal(hasRemoteContent('<p>hi <img src="cid:a"> <a href="https://x.example">x</a></p>'), false);
  const { ms } = cpuMs(() => hasRemoteContent(`url(${' '.repeat(200_000)}x src=${' '.repeat(200_000)}"${' '.repeat(200_000)}x`));
  // bound: linear on long whitespace runs (a quadratic scan would take minutes); CPU time, so other load does not stretch it
  assert.ok(ms < 1000, `linear on long whitespace runs: ${ms.toFixed(0)} ms of CPU`);
  assert.equal(hasRemoteContent(`<img src= ' https://t.example/p.gif'>`), true);
  assert.deepEqual([0, 1023, 1024, 1536, 5 * 1024 * 1024].map(humanSize), ['0 B', '1023 B', '1.0 KB', '1.5 KB', '5.0 MB']);
});

test('GET /api/v1/inboxes/{address}/previews: the row previews of this inbox\'s ids, others and gone ones left out', async () => {
  await svc.send({ to: 'prev@ephemail.test', subject: 'code', text: 'Your code is 482913.\n\nThanks' });
  await svc.send({ to: 'other-prev@ephemail.test', subject: 'elsewhere', text: 'not yours' });
  const mine = (await (await svc.api('/api/v1/inboxes/prev@ephemail.test/emails')).json()).data[0].id as string;
  const theirs = (await (await svc.api('/api/v1/inboxes/other-prev@ephemail.test/emails')).json()).data[0].id as string;
  const gone = '01a20000-0000-7000-8000-000000000000';
  const res = await svc.api(`/api/v1/inboxes/prev@ephemail.test/previews?ids=${mine},${theirs},${gone},not-an-id`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    data: [{ id: mine, preview: 'Your code is 482913. Thanks', code: '482913', attachments_dropped: 0 }],
    meta: { address: 'prev@ephemail.test', count: 1 },
  });
  assert.equal((await svc.api('/api/v1/inboxes/prev@ephemail.test/previews')).status, 400, 'ids is required');
  assert.equal((await svc.api(`/api/v1/inboxes/nope/previews?ids=${mine}`)).status, 400);
});
