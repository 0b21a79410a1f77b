// Tiers, limits and rate-limit buckets (spec: Limits; DECISIONS.md "Rate-limit windows").
import { isIPv6 } from 'node:net';

/**
 * The anonymous bucket of a client IP: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 grouped
 * by /64 (one subscriber usually holds a whole /64).
 */
export function ipBucket(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return `ip:${mapped[1]}`;
  if (!isIPv6(ip)) return `ip:${ip}`;
  const [head, tail = ''] = ip.toLowerCase().split('%')[0].split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return `ip6:${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
