// Tiers, limits and rate-limit buckets (spec: Limits; docs/contract-decisions.md "Rate-limit windows").
import { isIPv6 } from 'node:net';

/** The largest request body the HTTP API and the MCP endpoint read (docs/security.md, "Limits"). */
export const BODY_LIMIT = 64 * 1024;

/**
 * The anonymous bucket of a client IP: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 grouped
 * by /64 (one subscriber usually holds a whole /64).
 */
export function ipBucket(ip: string): string {
  return ipBuckets(ip)[0];
}

/** The eight 16-bit groups of an IPv6 address, as 4-digit lowercase hex. */
function groupsOf(ip: string): string[] {
  const [head, tail = ''] = ip.toLowerCase().split('%')[0].split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups.map((g) => g.padStart(4, '0'));
}

const short = (g: string) => g.replace(/^0+(?=.)/, '');

/**
 * The buckets a client counts in, narrowest first: an IPv4 address alone; an IPv6 address's /64
 * (its own), then its /56 and /48 (what one subscriber or one site may hold: a /56 holds 256 /64s,
 * so per-/64 caps alone would let one site take every slot).
 */
export function ipBuckets(ip: string): string[] {
  if (!ip.includes(':')) return [`ip:${ip}`]; // IPv4 (the common case: no pattern to run)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return [`ip:${mapped[1]}`];
  if (!isIPv6(ip)) return [`ip:${ip}`];
  const g = groupsOf(ip);
  return [
    `ip6:${g.slice(0, 4).map(short).join(':')}::/64`,
    `ip6:${g.slice(0, 3).map(short).join(':')}:${short(`${g[3].slice(0, 2)}00`)}::/56`,
    `ip6:${g.slice(0, 3).map(short).join(':')}::/48`,
  ];
}

/**
 * What a client's wider IPv6 blocks may spend together, as multiples of one client's own limit (an
 * IPv4 address or an IPv6 /64): requests and key mints count in the /64, the /56 and the /48 at once.
 * A /56 (one subscriber's usual delegation: 256 /64s) gets four times one client's quota, a /48 (one
 * site: 65,536 /64s) sixteen times; without this each /64 of a /48 had a full quota of its own.
 */
export const REQUEST_SCALE = Object.freeze({ per56: 4, per48: 16 });
/** Free keys: a /56 may mint twice what one client may in a day, a /48 four times (3, 6 and 12 by default). */
export const KEY_MINT_SCALE = Object.freeze({ per56: 2, per48: 4 });

/** The client's buckets, narrowest first, each with how many times one client's limit it may spend. */
export function scaledBuckets(ip: string, scale: { per56: number; per48: number }): { bucket: string; factor: number }[] {
  const buckets = ipBuckets(ip);
  return buckets.map((bucket, i) => ({ bucket, factor: i === 0 ? 1 : i === 1 ? scale.per56 : scale.per48 }));
}

/** Caps of things held at once (connections, streams) per client, at each width of ipBuckets(). */
export interface HoldCaps {
  /** An IPv4 address, or an IPv6 /64. */
  perAddress: number;
  per56: number;
  per48: number;
}

/**
 * Counts what each client holds at once against HoldCaps: take() returns a release function, or
 * null when any of the client's buckets is full. Pure bookkeeping, no I/O.
 */
export function createHoldCounter(caps: HoldCaps) {
  const held = new Map<string, number>();
  const capOf = (i: number) => (i === 0 ? caps.perAddress : i === 1 ? caps.per56 : caps.per48);
  return {
    take(ip: string): (() => void) | null {
      const buckets = ipBuckets(ip);
      if (buckets.some((b, i) => (held.get(b) ?? 0) >= capOf(i))) return null;
      for (const b of buckets) held.set(b, (held.get(b) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        for (const b of buckets) {
          const n = (held.get(b) ?? 1) - 1;
          if (n <= 0) held.delete(b);
          else held.set(b, n);
        }
      };
    },
    /** Buckets holding anything (tests, metrics). */
    get size() {
      return held.size;
    },
  };
}

/**
 * How far one email may fan out through webhooks (docs/push.md "Limits", docs/security.md 17): what
 * one received message, one address, one key and one webhook can make the service queue and send.
 */
export const WEBHOOK_FANOUT = Object.freeze({
  /** Events one received message may queue, all its recipients and matching webhooks together. */
  eventsPerMessage: 100,
  /** Webhooks watching one address (or one `*@<domain>`), all keys together. */
  hooksPerAddress: 10,
  /** Events queued for one key's webhooks together (waiting for a first attempt or a retry); more are dropped. */
  pendingPerKey: 200,
  /** Events queued for one webhook; more are dropped. */
  pendingPerHook: 100,
});

/**
 * At most `max` of `items`, taken round-robin across their groups (groups in the order of their first
 * item, items in order within a group), so a group with many items cannot crowd out another's one.
 * `left` keeps the input order. Pure.
 */
export function shareFairly<T>(items: readonly T[], groupOf: (item: T) => string, max: number): { taken: T[]; left: T[] } {
  if (items.length <= max) return { taken: [...items], left: [] };
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const g = groupOf(item);
    const list = groups.get(g);
    if (list) list.push(i);
    else groups.set(g, [i]);
  });
  const queues = [...groups.values()];
  const chosen = new Set<number>();
  const taken: T[] = [];
  for (let round = 0; taken.length < max; round++) {
    let any = false;
    for (const q of queues) {
      if (round >= q.length) continue;
      any = true;
      chosen.add(q[round]);
      taken.push(items[q[round]]);
      if (taken.length === max) break;
    }
    if (!any) break;
  }
  return { taken, left: items.filter((_, i) => !chosen.has(i)) };
}
