// Codes and links (domain/extract/): table tests of the tricky cases, and linear time on hostile input.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { extractCodes } from '../../src/domain/extract/codes.ts';
import { destinationOf, extractLinks } from '../../src/domain/extract/links.ts';
import { cpuMs } from '../helpers/time.ts';

const codes = (text: string, subject = '') => extractCodes({ subject, text, htmlText: null }).map((c) => c.value);

test('codes: grouping removed, alphanumeric kept as shown, several languages', () => {
  assert.deepEqual(codes('Your verification code is 559 120.'), ['559120']);
  assert.deepEqual(codes('Your verification code is 559-120.'), ['559120']);
  assert.deepEqual(codes('Enter this code: 5 5 9 1 2 0'), ['559120']);
  assert.deepEqual(codes('Your login code: K7Q-9XZ'), ['K7Q-9XZ']);
  assert.deepEqual(codes('Use this code: AB12CD'), ['AB12CD']);
  assert.deepEqual(codes('Ihr Bestätigungscode lautet 482913'), ['482913']);
  assert.deepEqual(codes('Votre code de vérification : 204 618'), ['204618']);
  assert.deepEqual(codes('Tu código de verificación es 739102'), ['739102']);
  assert.deepEqual(codes('認証コード：482913'), ['482913']);
  assert.deepEqual(codes('Confirm it below.', '481516 is your verification code'), ['481516'], 'from the subject');
  const [c] = extractCodes({ subject: '', text: 'Hi! Your one-time passcode is 615243. It expires soon.', htmlText: null });
  assert.match(c.context, /passcode is 615243/);
});

test('codes: precision first — numbers that are something else are never codes', () => {
  for (const text of [
    'Order #123456 confirmed. Total: $49.99.',
    'Your code is ready. Call us at +1 555 123 4567.',
    'Card ending in 4242 was charged 12.00 EUR.',
    'Paid with Visa •••• 4242. Your code: none needed.',
    'Code of conduct updated on 2026-11-24.',
    'The code release 2026 is out.',
    'Your IP 192.168.1.10 used code access.',
    'IBAN DE89370400440532013000, your code is not required.',
    'Use code SAVE20 for 20% off.',
    'Tracking number 1Z999AA10123456784 for your code order.',
    'Nothing here but 123456 without any keyword.',
    'Your code costs 1299 € today.',
  ]) assert.deepEqual(codes(text), [], text);
});

test('links: kinds, destinations of tracked links, List-Unsubscribe, no pixels, action first', () => {
  const links = extractLinks({
    html: '<p><a href="https://brand.example/view">View this email in your browser</a></p><img src="https://t.example/open.gif" width="1" height="1"><a href="https://r.awstrack.me/L0/https:%2F%2Fapp.example%2Fverify%3Ft=1/1/abc=">Confirm email</a><a href="https://u1.ct.sendgrid.example/ls/click?upn=opaque">Reset password</a><a href="https://click.example/x?redirect=https%3A%2F%2Fapp.example%2Flogin%3Fm%3D1">Sign in</a><a href="https://brand.example/unsub">Unsubscribe</a><a href="javascript:alert(1)">Click</a><a href="#top">Top</a>',
    text: null,
    listUnsubscribe: '<mailto:u@brand.example?subject=unsubscribe>, <https://brand.example/lu>',
  });
  assert.deepEqual(links.map((l) => [l.kind, l.text]), [
    ['verify', 'Confirm email'], ['reset_password', 'Reset password'], ['login', 'Sign in'],
    ['view_online', 'View this email in your browser'], ['unsubscribe', 'Unsubscribe'],
    ['unsubscribe', 'List-Unsubscribe'], ['unsubscribe', 'List-Unsubscribe'],
  ]);
  assert.equal(links[0].destination, 'https://app.example/verify?t=1');
  assert.equal(links[1].destination, null, 'an opaque tracker keeps its secret');
  assert.equal(links[2].destination, 'https://app.example/login?m=1');
  assert.ok(!links.some((l) => l.url.includes('open.gif')), 'a tracking pixel is not a link');
  assert.equal(links[0].url, 'https://r.awstrack.me/L0/https:%2F%2Fapp.example%2Fverify%3Ft=1/1/abc=', 'the href as written');
  assert.equal(extractLinks({ html: '<a href="https://x.example/a?b=1&amp;c=2">Go</a>', text: null, listUnsubscribe: null })[0].url, 'https://x.example/a?b=1&c=2', 'entities decoded');
  assert.equal(destinationOf('https://x.example/?url=javascript:alert(1)'), null, 'only http(s) destinations');
  assert.equal(destinationOf('https://app.example/login?redirect=https%3A%2F%2Fapp.example%2Fhome'), null, 'a login page\'s own after-login redirect is not a tracker');
});

test('links in a text-only email are labelled by their line', () => {
  const links = extractLinks({ html: null, text: 'To activate your account, visit:\nhttps://forum.example/activate/abc\n\nUnsubscribe: https://forum.example/unsub', listUnsubscribe: null });
  assert.deepEqual(links.map((l) => [l.kind, l.url]), [['verify', 'https://forum.example/activate/abc'], ['unsubscribe', 'https://forum.example/unsub']]);
});

test('linear time on hostile input', () => {
  const { ms } = cpuMs(() => {
    extractCodes({ subject: 'code '.repeat(10_000), text: `${'code 1 2 3 4 5 6 7 8 9 '.repeat(20_000)}`, htmlText: 'Your code is '.repeat(20_000) });
    extractLinks({ html: '<a href="https://x.example/">'.repeat(50_000), text: null, listUnsubscribe: '<'.repeat(100_000) });
    extractLinks({ html: null, text: 'https://'.repeat(100_000), listUnsubscribe: null });
  });
  // bound: linear on hostile input (a quadratic pass would take minutes); CPU time, so other load does not stretch it
  assert.ok(ms < 5000, `took ${ms.toFixed(0)} ms of CPU`);
});
