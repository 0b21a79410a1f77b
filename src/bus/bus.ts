// The Bus seam: "new mail for this address" wake-ups. A long-poll subscribes before it queries the
// store, so no delivery between query and subscription is missed. Backends: memory (one process),
// redis (pub/sub, one subscription per node).

export type MailListener = (emailId: string) => void;

export interface BusCapabilities {
  /**
   * Publishes from one node reach every other node in the order they were made. False on Redis
   * Cluster, where a key-less PUBLISH may go to any master. Listeners never depend on order: a woken
   * waiter re-queries the store.
   */
  orderedAcrossNodes: boolean;
}

export interface Bus {
  readonly capabilities: BusCapabilities;
  /** Announces that mail for `address` (lowercase) was stored. */
  publish(address: string, emailId: string): Promise<void>;
  /** Calls `listener` for each later publish to `address`; returns the unsubscribe function. */
  subscribe(address: string, listener: MailListener): () => void;
  close(): Promise<void>;
}
