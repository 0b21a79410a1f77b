// IP addresses and CIDR blocks, the one way they are read and matched: the proxies trusted to name
// the HTTP client (EPHEMAIL_TRUST_PROXY), the balancers that must send a PROXY header to SMTP and
// IMAP (EPHEMAIL_SMTP_PROXY_PROTOCOL), and config's check of both.
//
// Strict: an address as node:net's isIP takes it (IPv4 only as four decimal octets, no leading
// zeros: `10.1`, `0x0a.0.0.1` and `010.0.0.1` are not addresses), a prefix of 1 to 3 digits within
// the family's width, no zone (`%eth0`) in an entry. Matching is node:net's BlockList, which treats
// an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, `::ffff:a00:1`) as its IPv4 address both ways: a
// dual-stack listener's IPv4 peer matches `10.0.0.0/8`, and an IPv4 peer matches `::ffff:10.0.0.0/104`.
import { BlockList, isIP } from 'node:net';

export interface IpRange {
  address: string;
  /** Prefix length: 32 or 128 for a single address. */
  bits: number;
  family: 'ipv4' | 'ipv6';
}

/** An address or CIDR block (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`), or null when it is not one. */
export function parseIpRange(entry: string): IpRange | null {
  const [address, bits, extra] = entry.split('/');
  if (extra !== undefined || address.includes('%')) return null;
  const v = isIP(address);
  if (v === 0) return null;
  const width = v === 4 ? 32 : 128;
  if (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= width)) return null;
  return { address, bits: bits === undefined ? width : Number(bits), family: v === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * A matcher over addresses and CIDR blocks (each as parseIpRange reads it; a bad one throws). It
 * answers false for anything that is not an IP address (undefined, a name, `1.2.3`); a peer's zone
 * (`fe80::1%eth0`, as Node reports a link-local peer) is not part of the match.
 */
export function ipRangeMatcher(entries: readonly string[]): (ip: string | undefined) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const r = parseIpRange(entry);
    if (!r) throw new TypeError(`not an IP address or CIDR block: ${JSON.stringify(entry.slice(0, 100))}`);
    list.addSubnet(r.address, r.bits, r.family);
  }
  return (ip) => {
    if (!ip) return false;
    const v = isIP(ip);
    if (v === 4) return list.check(ip, 'ipv4');
    if (v !== 6) return false;
    const zone = ip.indexOf('%');
    return list.check(zone < 0 ? ip : ip.slice(0, zone), 'ipv6');
  };
}
