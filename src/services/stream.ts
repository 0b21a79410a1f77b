// Following an inbox: the event streams' use of the one notification path (services/wait.ts, whose
// registry holds the address's bus subscription and tells this follower of each delivery, as it
// wakes the long-polls), behind the API's event stream and the web page's live list. It starts
// listening before it first reads, reads from a cursor in id order, and moves the cursor past what
// it delivered: ids only grow within an inbox (store.ts), so nothing is delivered twice and nothing
// slips through between a replay and live mail. "From now" is a point the caller can see: `onReady`
// runs once the cursor is fixed (at once for a replay, after the first successful read otherwise),
// before any delivery; a client told then (the event stream's opening comment) misses no mail sent
// after it. A first read that fails is retried on a timer, not on the next delivery, which would
// make that delivery the cursor and skip it.
import type { EmailSummary } from '../domain/summary.ts';
import type { Core } from './core.ts';

const PAGE = 100;
/** A first read that failed is tried again after this long (the follower is not ready until then). */
export const FIRST_READ_RETRY_MS = 1000;

export interface InboxFollower {
  /** Stops following (idempotent). */
  close(): void;
}

export interface FollowOptions {
  /** Deliver mail after this id (a replay of what is still stored); null: only mail from now on. */
  since: string | null;
  /** Called with each batch, oldest first; never twice for one email. */
  deliver(emails: EmailSummary[]): void;
  /** A read failed; the follower keeps going and reads again on the next delivery. */
  onError?(err: unknown): void;
  /** The cursor is fixed: every email stored from now on will be delivered. Called once, before any delivery. */
  onReady?(): void;
}

export function followInbox(core: Pick<Core, 'store' | 'waits' | 'clock'>, address: string, options: FollowOptions): InboxFollower {
  let closed = false;
  let cursor: string | null = options.since;
  let ready = false;
  let reading = false;
  let again = false;
  let retry: ReturnType<typeof setTimeout> | null = null;

  const read = async (): Promise<void> => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        for (;;) {
          if (closed) return;
          const now = core.clock.now();
          const page = cursor === null
            ? (await core.store.listEmails(address, { limit: 1 }, now)) // the newest: where "from now on" starts
            : await core.store.listEmails(address, { limit: PAGE, since: cursor }, now);
          if (closed) return;
          if (cursor === null) {
            cursor = page[0]?.id ?? '00000000-0000-7000-8000-000000000000';
            options.onReady?.();
            break;
          }
          if (page.length > 0) {
            cursor = page[page.length - 1].id;
            options.deliver(page);
          }
          if (page.length < PAGE) break;
        }
      } while (again && !closed);
    } catch (err) {
      options.onError?.(err);
      if (cursor === null && !closed) {
        // not ready yet: try again on a timer (a delivery would otherwise become the cursor, unseen)
        retry = setTimeout(() => {
          retry = null;
          void read();
        }, FIRST_READ_RETRY_MS);
        retry.unref?.();
      }
    } finally {
      reading = false;
      if (again && !closed && cursor !== null) void read();
    }
  };

  const unsubscribe = core.waits.watch(address, () => {
    if (ready) void read();
    else again = true;
  });
  ready = true;
  if (cursor !== null) options.onReady?.();
  void read();
  return {
    close() {
      if (closed) return;
      closed = true;
      if (retry) clearTimeout(retry);
      unsubscribe();
    },
  };
}
