// Mcp-Session-Id values: issued on `initialize`, signed, dated, and checked without any server state
// (docs/contract-decisions.md "Tool endpoint limits", docs/mcp.md "Sessions"). A valid id is its own rate-limit
// bucket; an invented one is not, so a client cannot mint fresh quota by making ids up; an id
// older than SESSION_LIFETIME_MS has expired (the client initializes again).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** How long an id is valid after `initialize` issued it. */
export const SESSION_LIFETIME_MS = 24 * 3600_000;

export type SessionCheck = { bucket: string } | { expired: true } | null;

export interface SessionIds {
  /** A new signed id: `<22 base64url random>.<issue time, base36 seconds>.<22 base64url HMAC-SHA256 prefix>`. */
  issue(now: number): string;
  /** The rate-limit bucket of a valid id; `expired` for a genuine id past its lifetime; null for a missing, malformed or forged one. */
  check(id: string | undefined, now: number): SessionCheck;
}

const ID_RE = /^([A-Za-z0-9_-]{22})\.([0-9a-z]{1,10})\.([A-Za-z0-9_-]{22})$/;

/**
 * `secret` is EPHEMAIL_SESSION_SECRET; when null a random secret is drawn for this process (ids then
 * stop being valid after a restart and on other nodes, which only costs the client its own bucket).
 */
export function createSessionIds(secret: string | null, lifetimeMs = SESSION_LIFETIME_MS): SessionIds {
  const key = secret === null ? randomBytes(32) : Buffer.from(secret, 'utf8');
  const sign = (nonce: string, issued: string) => createHmac('sha256', key).update(`ephemail-mcp-session:${nonce}.${issued}`).digest().subarray(0, 16);
  return {
    issue(now) {
      const nonce = randomBytes(16).toString('base64url');
      const issued = Math.floor(now / 1000).toString(36);
      return `${nonce}.${issued}.${sign(nonce, issued).toString('base64url')}`;
    },
    check(id, now) {
      const m = id === undefined ? null : ID_RE.exec(id.trim());
      if (!m) return null;
      const given = Buffer.from(m[3], 'base64url');
      const expected = sign(m[1], m[2]);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      const issuedMs = parseInt(m[2], 36) * 1000;
      if (!(now - issuedMs < lifetimeMs) || issuedMs > now + 60_000) return { expired: true };
      return { bucket: `mcp:${m[1]}` };
    },
  };
}
