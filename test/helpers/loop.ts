// Watches the event loop of this process: the longest gap between timer turns while it ran.
export function watchEventLoop(everyMs = 5): { worstMs(): number; stop(): void } {
  let worst = 0;
  let last = performance.now();
  const tick = setInterval(() => {
    const t = performance.now();
    worst = Math.max(worst, t - last);
    last = t;
  }, everyMs);
  return { worstMs: () => worst, stop: () => clearInterval(tick) };
}
