// Free API keys: minting (3 per IP per 24 h), authenticating (SHA-256 lookup), and the operator's
// revoke/list. Only the hash of a key is ever stored (spec: Authentication 6).
import { remembering } from '../domain/remember.ts';
import { createHash, randomInt } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.ts';
import { KEY_MINT_SCALE, scaledBuckets } from '../domain/limits.ts';
import type { KeyRecord, KeyStore } from '../store/keys.ts';
import type { Core } from './core.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const KEY_PREFIX = 'eph_';
const KEY_RE = /^eph_[0-9A-Za-z]{40}$/;
const DAY_MS = 86_400_000;

export const hashKey = (raw: string) => createHash('sha256').update(raw).digest('hex');

/**
 * hashKey with a memory of the keys seen lately (its own state: the caller makes one): a client
 * sends the same key on every request, and the hash was a tenth of a read's own work. At most `max`
 * well-formed keys are remembered; then the memory starts again.
 */
export const keyHasher = (max = 1024): ((raw: string) => string) => remembering(hashKey, max);

export function generateKey(): string {
  let s = KEY_PREFIX;
  for (let i = 0; i < 40; i++) s += BASE62[randomInt(62)];
  return s;
}

export interface MintedKey {
  apiKey: string;
  record: KeyRecord;
}

/**
 * Mints a key for a client IP: at most `keysPerIpPerDay` per client (an IPv4 address or an IPv6 /64)
 * in any 24 hours (the limiter's sliding window: `take`, atomic), and for IPv6 at most
 * KEY_MINT_SCALE times that per /56 and per /48 in a UTC day (its day windows). A wider block is
 * checked before and counted after the client's own mint, so an attempt its /64 refuses spends
 * nothing of its neighbours'; parallel mints from many /64s of one block can pass its check
 * together, overshooting by at most those in flight.
 */
export async function mintKey(core: Pick<Core, 'config' | 'clock' | 'limiter' | 'keys'>, input: { label?: string; contactEmail?: string }, clientIp: string): Promise<MintedKey> {
  const [own, ...wider] = scaledBuckets(clientIp, KEY_MINT_SCALE);
  const now = core.clock.now();
  const blocks = wider.map(({ bucket, factor }) => {
    const max = core.config.keysPerIpPerDay * factor;
    return { bucket, max, limiterBucket: `keymint:${bucket}`, limits: { perMinute: max, perDay: max } };
  });
  for (const b of blocks) {
    const r = await core.limiter.peek(b.limiterBucket, b.limits, now);
    if (r.usedDay >= b.max) {
      const retryAfter = Math.max(1, Math.ceil((DAY_MS - (now % DAY_MS)) / 1000));
      throw new AppError('rate_limited', `The network ${b.bucket.replace(/^ip6:/, '')} already created ${b.max} keys today; the next one can be created in ${retryAfter} s. Reuse a key you have.`, { retryAfter });
    }
  }
  const apiKey = generateKey();
  const record: KeyRecord = {
    hash: hashKey(apiKey),
    prefix: apiKey.slice(0, 12),
    label: input.label ?? '',
    contactEmail: input.contactEmail ?? null,
    createdAt: now,
    revokedAt: null,
    lastUsedAt: null,
  };
  const res = await core.limiter.take(`keymint:${own.bucket}`, core.config.keysPerIpPerDay, DAY_MS, now);
  if (!res.ok) {
    const retryAfter = Math.ceil(res.retryAfterMs / 1000);
    throw new AppError('rate_limited', `This IP address already created ${core.config.keysPerIpPerDay} keys in the last 24 hours; the next one can be created in ${retryAfter} s. Reuse a key you have.`, { retryAfter });
  }
  // counted first: a store that fails now costs the IP one of its mints (the caller sees a 500)
  await core.keys.addKey(record);
  for (const b of blocks) await core.limiter.hit(b.limiterBucket, b.limits, now);
  return { apiKey, record };
}

/**
 * The live key for a raw key string; 401 unauthorized when it is malformed, unknown or revoked (no
 * downgrade). At once when the store holds the key's record in memory (KeyStore peekKey), else a
 * promise (not an async function: no promise turn on the path of every keyed API call). A malformed
 * key throws; a key read from the store and refused rejects.
 */
export function authenticate(core: Pick<Core, 'keys'>, raw: string, hash: (raw: string) => string = hashKey): KeyRecord | Promise<KeyRecord> {
  const key = raw.trim();
  if (!KEY_RE.test(key)) throw invalidKey();
  const h = hash(key);
  const record = core.keys.peekKey?.(h);
  return record === undefined ? core.keys.findKey(h).then(liveKey) : liveKey(record);
}

/** The record of a live key; 401 for no record or a revoked one (no downgrade). */
function liveKey(record: KeyRecord | null): KeyRecord {
  if (!record) throw invalidKey();
  if (record.revokedAt !== null) throw new AppError('unauthorized', `The API key ${record.prefix}… was revoked by the operator; create a new one`, { hint: { kind: 'create_key' } });
  return record;
}

/**
 * Records that a key was used: in the store at most once per key per wall-clock minute on this node
 * (a set of the keys seen this minute, emptied when the minute turns: bounded by the keys active in
 * one minute), never waited for. So `lastUsedAt` is the first use of the latest minute with a use,
 * and costs one small write per active key per minute per node.
 */
export function keyUseRecorder(store: Pick<KeyStore, 'touchKey'>, log: Logger): (hash: string, now: number) => void {
  let minute = -1;
  const seen = new Set<string>();
  return (hash, now) => {
    const m = Math.floor(now / 60_000);
    if (m !== minute) {
      minute = m;
      seen.clear();
    }
    if (seen.has(hash)) return;
    seen.add(hash);
    store.touchKey(hash, now).catch((err: unknown) => log.debug({ err }, 'key use not recorded'));
  };
}

const invalidKey = () => new AppError('unauthorized', 'The API key is not valid (keys cannot be recovered). Check it was copied whole, or create a new one', { hint: { kind: 'create_key' } });

export const revokeKeys = (core: Pick<Core, 'keys' | 'clock'>, prefix: string) => core.keys.revokeKeys(prefix, core.clock.now());
export const listKeys = (core: Pick<Core, 'keys'>) => core.keys.listKeys();
