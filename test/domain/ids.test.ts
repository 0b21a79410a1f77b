import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createIdGenerator, formatUuidV7, isUuid, uuidTimestamp } from '../../src/domain/ids.ts';
import { createSecureRandom } from '../../src/random.ts';

test('ids are UUIDv7 and carry their millisecond', () => {
  const id = createIdGenerator(createSecureRandom()).next(1_795_000_000_123);
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(uuidTimestamp(id), 1_795_000_000_123);
  assert.ok(isUuid(id));
});

test('ids strictly increase within one millisecond and when the clock steps back', () => {
  const gen = createIdGenerator(createSecureRandom());
  const times = [1000, 1000, 1000, 999, 5, 1001, 1001, 2000];
  const ids = times.flatMap((t) => Array.from({ length: 500 }, () => gen.next(t)));
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids[i]} > ${ids[i - 1]}`);
});

test('a generator resumed after an id continues above it', () => {
  const first = createIdGenerator(createSecureRandom());
  let last = '';
  for (let i = 0; i < 100; i++) last = first.next(5000);
  const resumed = createIdGenerator(Math.random, last);
  assert.ok(resumed.next(4000) > last, 'clock earlier than the stored id');
  assert.ok(createIdGenerator(Math.random, last).next(5000) > last, 'same millisecond');
});

test('format orders by (ms, counter) and overflows into the next millisecond', () => {
  assert.ok(formatUuidV7(1, 0n, 0xffffffff) < formatUuidV7(1, 1n, 0));
  assert.ok(formatUuidV7(1, (1n << 42n) - 1n, 0xffffffff) < formatUuidV7(2, 0n, 0));
  const gen = createIdGenerator(() => 0.9999999);
  const a = gen.next(10);
  const b = gen.next(10);
  assert.ok(b > a);
});

test('the random bits come from the cryptographic generator, not Math.random (whose state can be recovered)', () => {
  const original = Math.random;
  Math.random = () => 0.5; // were ids drawn from it, every random part would be the same
  try {
    const gen = createIdGenerator(createSecureRandom());
    const ids = Array.from({ length: 200 }, (_, i) => gen.next(1_795_000_000_000 + (i % 2)));
    const low32 = new Set(ids.map((id) => id.slice(-8)));
    assert.ok(low32.size > 190, `the low 32 bits vary (${low32.size} distinct of 200)`);
    const starts = new Set(Array.from({ length: 50 }, (_, i) => createIdGenerator(createSecureRandom()).next(2_000_000 + i).slice(15, 23)));
    assert.ok(starts.size > 45, 'each millisecond starts its counter at a random point');
  } finally {
    Math.random = original;
  }
});
