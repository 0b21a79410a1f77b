// The summary of a received email: what every list, event and webhook shows without reading the
// message. A domain type: the store keeps it (store/store.ts), the message model builds on it
// (message.ts), the wire formats map it (http/schemas/wire.ts).

/** What every email has, from its envelope and arrival (summaries carry these). */
export interface Arrival {
  /** Normalised (lowercase) inbox address. */
  address: string;
  sender: string;
  mailedBy: string | null;
  subject: string;
  receivedAt: number;
  expiresAt: number;
}

export interface EmailSummary extends Arrival {
  id: string;
  hasAttachments: boolean;
}
