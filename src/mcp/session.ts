// Mcp-Session-Id values: issued on `initialize`, signed, and checked without any server state
// (DECISIONS.md "Tool endpoint limits"). A valid id is its own rate-limit bucket; an invented one
// is not, so a client cannot mint fresh quota by making ids up.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface SessionIds {
  /** A new signed id: `<22 base64url random>.<22 base64url HMAC-SHA256 prefix>` (visible ASCII only). */
  issue(): string;
  /** The rate-limit bucket of a valid id, or null for a missing, malformed or forged one. */
  bucketOf(id: string | undefined): string | null;
}

const ID_RE = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{22})$/;

/**
 * `secret` is EPHEMAIL_SESSION_SECRET; when null a random secret is drawn for this process (ids then
 * stop being valid after a restart and on other nodes, which only costs the client its own bucket).
 */
export function createSessionIds(secret: string | null): SessionIds {
  const key = secret === null ? randomBytes(32) : Buffer.from(secret, 'utf8');
  const sign = (nonce: string) => createHmac('sha256', key).update(`ephemail-mcp-session:${nonce}`).digest().subarray(0, 16);
  return {
    issue() {
      const nonce = randomBytes(16).toString('base64url');
      return `${nonce}.${sign(nonce).toString('base64url')}`;
    },
    bucketOf(id) {
      const m = id === undefined ? null : ID_RE.exec(id.trim());
      if (!m) return null;
      const given = Buffer.from(m[2], 'base64url');
      const expected = sign(m[1]);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      return `mcp:${m[1]}`;
    },
  };
}
