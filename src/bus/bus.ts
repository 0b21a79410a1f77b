// The Bus seam: "new mail for this address" wake-ups. A long-poll subscribes before it queries the
// store, so no delivery between query and subscription is missed. Backends: memory (one process),
// redis (pub/sub, one subscription per node).

export type MailListener = (emailId: string) => void;

export interface Bus {
  /** Announces that mail for `address` (lowercase) was stored. */
  publish(address: string, emailId: string): Promise<void>;
  /** Calls `listener` for each later publish to `address`; returns the unsubscribe function. */
  subscribe(address: string, listener: MailListener): () => void;
  close(): Promise<void>;
}
