// Which webhook URLs and addresses may be called (SSRF guard). Only http(s) URLs, and only public
// unicast addresses: loopback, private, link-local, carrier-grade NAT, metadata (169.254.169.254,
// fd00:ec2::254), multicast, reserved, documentation, 6to4/Teredo/NAT64 forms (which embed an IPv4
// address) are refused unless the operator sets EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true.
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';

/**
 * Whether `ip` (a literal) is a public unicast address; IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is judged
 * as IPv4. The rest of `::/8` is IANA-reserved and refused whatever it embeds: ipaddr.js calls
 * `::a00:1` (IPv4-compatible 10.0.0.1) and `::1:7f00:1` plain unicast.
 */
const MAPPED_DOTTED = /^(?:::|(?:0{1,4}:){5})ffff:\d{1,3}(?:\.\d{1,3}){3}$/i;

export function isPublicAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  try {
    // ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d`: a dotted tail counts as mapped only when spelled so
    if (ip.includes(':') && ip.includes('.') && !MAPPED_DOTTED.test(ip)) return false;
    const parsed = ipaddr.parse(ip);
    if (parsed.kind() === 'ipv6') {
      const v6 = parsed as ipaddr.IPv6;
      if (v6.parts[0] < 0x100 && !v6.isIPv4MappedAddress()) return false;
    }
    return ipaddr.process(ip).range() === 'unicast';
  } catch {
    return false;
  }
}

export const WEBHOOK_URL_MAX = 2000;

export interface ParsedWebhookUrl {
  url: URL;
  /** The host as an IP literal (brackets removed), or null for a name. */
  literal: string | null;
}

/** Parses a webhook URL, or says in one line why it cannot be one. */
export function parseWebhookUrl(raw: string): ParsedWebhookUrl | string {
  if (raw.length > WEBHOOK_URL_MAX) return `url is longer than ${WEBHOOK_URL_MAX} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `url must be http or https, not ${url.protocol.replace(/:$/, '')}`;
  if (url.hostname === '') return 'url has no host';
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { url, literal: isIP(host) ? host : null };
}

export const refusedAddressMessage = (ip: string) =>
  `${ip} is not a public address (loopback, private, link-local and metadata addresses are refused; an operator may allow them with EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true)`;
