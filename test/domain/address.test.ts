// parseAddress: the one rule of what an inbox address may be (SMTP RCPT and the API paths share it).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mailedByOf, parseAddress, randomLocalPart } from '../../src/domain/address.ts';

test('accepted addresses are normalised (lowercase, NFC, no trailing dot on the domain)', () => {
  const cases: [string, string][] = [
    ['Alice@Ephemail.Test', 'alice@ephemail.test'],
    ['first.last+tag@ephemail.test', 'first.last+tag@ephemail.test'],
    ["o'brien@ephemail.test", "o'brien@ephemail.test"],
    ['jürgen@ephemail.test', 'jürgen@ephemail.test'],
    ['ju\u0308rgen@ephemail.test', 'jürgen@ephemail.test'],
    ['x@ephemail.test.', 'x@ephemail.test'],
    [`${'a'.repeat(64)}@ephemail.test`, `${'a'.repeat(64)}@ephemail.test`],
  ];
  for (const [input, address] of cases) assert.equal(parseAddress(input)?.address, address, input);
  assert.deepEqual(parseAddress('Bob@Mail.Example'), { address: 'bob@mail.example', localPart: 'bob', domain: 'mail.example' });
});

test('malformed addresses are refused', () => {
  for (const input of [
    '', '@ephemail.test', 'x@', 'x', 'a@b@ephemail.test', '.x@ephemail.test', 'x.@ephemail.test', 'a..b@ephemail.test',
    '"quoted"@ephemail.test', 'sp ace@ephemail.test', `${'a'.repeat(65)}@ephemail.test`, `${'ü'.repeat(33)}@ephemail.test`,
    'zero\u200bwidth@ephemail.test', 'x@-bad.test', 'x@bad-.test', 'x@under_score.test', `x@${'a'.repeat(64)}.test`, 'x'.repeat(321),
    'cr\r@ephemail.test', 'nul\u0000@ephemail.test',
  ]) assert.equal(parseAddress(input), null, JSON.stringify(input));
});

test('mailed_by is the envelope sender\'s domain; the null sender has none', () => {
  assert.equal(mailedByOf('Bounce@Mail.Example.'), 'mail.example');
  assert.equal(mailedByOf(''), null);
  assert.equal(mailedByOf(false), null);
  assert.equal(mailedByOf('no-at-sign'), null);
});

test('random local parts: the requested length, [a-z0-9] only, every character reachable', () => {
  let i = 0;
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => i++ % 256);
  const seen = new Set<string>();
  for (let k = 0; k < 50; k++) {
    const s = randomLocalPart(10, bytes);
    assert.match(s, /^[a-z0-9]{10}$/);
    for (const c of s) seen.add(c);
  }
  assert.equal(seen.size, 36);
});
