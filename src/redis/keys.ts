// The Redis key layout (docs/scaling.md "Key layout"). Every key of one inbox — its index, its
// emails, their attachments, its id sequence on Cluster — carries the hash tag of the inbox's slot,
// so each multi-key operation is one script in one slot. The slot is also written into every email
// id (the top 14 of its 32 random bits), so an email is found from its id alone with no lookup key.

/** CRC16/XMODEM, the hash Redis Cluster uses for key slots. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

export const SLOTS = 16384;

/** The Cluster slot of a key, hash tags included (Redis Cluster spec, "Hash tags"). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % SLOTS;
}

/** For each slot, the shortest decimal string that hashes to it: the tag written as `{<tag>}`. */
const SLOT_TAGS: readonly string[] = (() => {
  const tags: string[] = new Array(SLOTS);
  let found = 0;
  for (let n = 0; found < SLOTS; n++) {
    const s = String(n);
    const slot = crc16(Buffer.from(s)) % SLOTS;
    if (tags[slot] === undefined) {
      tags[slot] = s;
      found++;
    }
  }
  return tags;
})();

export const slotTag = (slot: number): string => SLOT_TAGS[slot];

/** The slot an inbox lives in. */
export const addressSlot = (address: string): number => crc16(Buffer.from(address, 'utf8')) % SLOTS;

/** The slot written into an email id (top 14 of the last 32 bits); any UUID yields some slot. */
export function idSlot(id: string): number {
  const last = parseInt(id.slice(-8), 16);
  return Number.isNaN(last) ? 0 : last >>> 18;
}

/** Key names under one prefix (default `ephemail:`). */
export function keyspace(prefix: string) {
  const slotBase = (slot: number) => `${prefix}{${slotTag(slot)}}:`;
  return {
    prefix,
    /** Base of every key of the slot; scripts append `e:<id>`, `a:<id>:<n>`, `i:<address>`. */
    slotBase,
    /** Standalone: one sequence for all ids. Cluster: one per slot, beside the inboxes it numbers. */
    sequence: (slot: number | null) => (slot === null ? `${prefix}seq` : `${slotBase(slot)}seq`),
    /** Set of slot tags that hold mail: what sweepExpired visits. */
    slotsInUse: `${prefix}slots`,
    email: (id: string) => `${slotBase(idSlot(id))}e:${id}`,
    /** A message (hash), stored once; its raw bytes at `<key>:r` and parts at `<key>:p:<n>`, all in the tag's slot. */
    message: (messageKey: string) => `${prefix}m:{${messageKey}}`,
    index: (address: string) => `${slotBase(addressSlot(address))}i:${address}`,
    /** API keys live in one slot: small, never expiring, listed and revoked together. */
    keysBase: `${prefix}{keys}:`,
    keyRecord: (hash: string) => `${prefix}{keys}:k:${hash}`,
    keyList: `${prefix}{keys}:all`,
    /** Domains added at run time: one hash (domain → `<addedAt>` or `<addedAt>:<retiredAt>`), one slot. */
    domains: `${prefix}{domains}:all`,
    /** Rate-limit state of one bucket, tagged by the bucket. */
    limiterBase: (bucket: string) => `${prefix}l:{${bucket}}:`,
    /** The pub/sub channel of new-mail wake-ups. */
    channel: `${prefix}mail`,
  };
}

export type Keyspace = ReturnType<typeof keyspace>;
