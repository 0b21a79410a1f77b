// Test helper: an SSE client over fetch that collects `event:` blocks (id, event, data) and comment
// lines as they arrive.

export interface SseEvent { id?: string; event?: string; data?: string }

/** Opens a stream and collects its events as they come. */
export async function openStream(url: string, headers: Record<string, string>) {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let waiters: (() => void)[] = [];
  const done = (async () => {
    if (!res.ok || !res.body) return;
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const ev: SseEvent = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line);
            const m = /^(id|event|data): ?(.*)$/.exec(line);
            if (m) ev[m[1] as keyof SseEvent] = m[2];
          }
          if (ev.event) events.push(ev);
          for (const w of waiters) w();
          waiters = [];
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    res,
    events,
    comments,
    async until(n: number, ms = 5000) {
      const t0 = Date.now();
      while (events.length < n) {
        if (Date.now() - t0 > ms) throw new Error(`only ${events.length} of ${n} events after ${ms} ms`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100); // poll: woken by each block; the timer only re-checks the deadline
        });
      }
      return events;
    },
    /** Waits for a comment line matching `re` (the stream's opening comment says it is live). */
    async untilComment(re: RegExp, ms = 5000) {
      const t0 = Date.now();
      while (!comments.some((c) => re.test(c))) {
        if (Date.now() - t0 > ms) throw new Error(`no comment matching ${re} after ${ms} ms (${JSON.stringify(comments)})`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100); // poll: woken by each block; the timer only re-checks the deadline
        });
      }
    },
    /** Waits until the stream says it is live: from then on no new mail is missed (docs/push.md). */
    live(ms = 5000) {
      return this.untilComment(/^: ?streaming new mail/, ms);
    },
    async close() {
      abort.abort();
      await done;
    },
  };
}
