// The spam score of a message (issue 25 item 2, docs/sender-checks.md), as derive/spamd.ts reads it
// from SpamAssassin's spamd and the derived views keep it.

export interface SpamRule {
  name: string;
  score: number;
  description: string;
}

export interface SpamScore {
  score: number;
  threshold: number;
  isSpam: boolean;
  rules: SpamRule[];
  /** Only the first 512 KiB of the message were checked (derive/spamd.ts SPAM_MAX_BYTES). */
  truncated: boolean;
}

export interface SpamError {
  /** `spamd unreachable`, `spamd timed out`, or `spamd error: <its status line>`. */
  error: string;
}

export type SpamVerdict = SpamScore | SpamError;
