// Which webhook URLs and addresses may be called (SSRF guard). Only http(s) URLs, and only public
// unicast addresses: loopback, private, link-local, carrier-grade NAT, metadata (169.254.169.254,
// fd00:ec2::254), multicast, reserved, documentation, 6to4/Teredo/NAT64 forms (which embed an IPv4
// address) are refused unless the operator sets EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true.
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';

/** Whether `ip` (a literal) is a public unicast address; IPv4-mapped IPv6 is judged as IPv4. */
export function isPublicAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  try {
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
