// What every store conformance suite shares (docs/house-style.md rule 2): the harness a runner gives
// (store-sqlite, store-redis, store-cluster), a test that opens a fresh store and closes it after,
// and made-up mail. A suite takes only the seam it tests: mail.suite.ts, keys.suite.ts,
// webhooks.suite.ts, domains.suite.ts, faults.suite.ts (docs/architecture.md "Store seams").
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import type { NewEmail, Store } from '../../src/store/store.ts';

export interface Closable {
  close(): Promise<void>;
}

/** `S`: the seam a suite tests (a backend implements them all: the runners open whole stores). */
export interface StoreHarness<S = Store> {
  /** A fresh, empty store (own file, key prefix or database). */
  open(): Promise<S & Closable>;
  /** Removes everything the suite wrote; runs once after the suite. */
  cleanup?(): Promise<void>;
  /** A reason to skip (printed), e.g. no Redis. */
  skip?: string | false;
}

const HOUR = 3_600_000;

export const inbox = (tag = '') => `${tag}${randomUUID().slice(0, 8)}@ephemail.test`;

/** A message's bytes as received. */
export const rawMessage = (subject = 'hello') => Buffer.from(`From: Sender <s@example.org>\r\nSubject: ${subject}\r\n\r\ntext ${randomUUID()}\r\n`);

export function newEmail(address: string, over: Partial<NewEmail> = {}): NewEmail {
  const receivedAt = over.receivedAt ?? Date.now();
  return {
    address,
    sender: 'Sender <s@example.org>',
    mailedBy: 'example.org',
    subject: 'hello',
    hasAttachments: false,
    raw: rawMessage(over.subject),
    receivedAt,
    expiresAt: receivedAt + HOUR,
    ...over,
  };
}

/** A test that opens a fresh store from the harness and closes it after. */
export const storeTest = <S>(harness: StoreHarness<S>) => (title: string, fn: (store: S & Closable) => Promise<void>) =>
  it(title, async () => {
    const store = await harness.open();
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  });
