// The message model (docs/house-style.md "The message model"): a received message is stored once, as
// received; everything a reader sees beyond the summary row is a derived view of those bytes,
// computed once per message (off the event loop, within a budget) and kept beside it.
import type { EmailSummary } from './summary.ts';

export interface HeaderField {
  name: string;
  value: string;
}

export interface AttachmentMeta {
  /** Unique within its email. */
  id: string;
  filename: string;
  contentType: string;
  sizeBytes: number;
  /** The part's Content-ID without angle brackets, or null. */
  contentId: string | null;
}

/** How a derivation ended: `ok`, or which budget ran out and which fallback was used. */
export type DerivationOutcome = 'ok' | 'html_over_budget' | 'parse_failed' | 'parse_over_budget';

/**
 * The views of a stored document by name, each with its value's type. Declared here and filled in by
 * derive/registry.ts from its entries (module augmentation): the domain lists no view, and a view
 * added to the registry is here without an edit.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-interface
export interface StoredViewValues {}
/** The views of a full email (those stored, then the verdicts, null until computed): filled in by derive/registry.ts. */
// eslint-disable-next-line @typescript-eslint/no-empty-interface
export interface EmailViewValues {}

/**
 * The derived views of one message (docs/decisions.md "Derived views"). `version` names the
 * derivation that made it: a stored document of an older version is derived again from the raw
 * message on its next read, so a new view works on mail already stored.
 */
export interface MessageViews extends StoredViewValues {
  version: number;
  /** The versions of views past their first (derive/registry.ts); absent when every view is at 1. */
  versions?: Record<string, number>;
  outcome: DerivationOutcome;
}

/** A whole email: its row, then every view of the registry (derive/registry.ts) by name. */
export interface EmailFull extends EmailSummary, EmailViewValues {}
