// Watches the event loop of this process: the longest gap between timer turns while it ran, in wall
// time and in this thread's own CPU time. A gap the thread spent working (our code, its GC) shows in
// both; one the OS spent running other processes (a loaded machine, test files beside this one)
// shows in wall time only.
export function watchEventLoop(everyMs = 5): { worstMs(): number; worstCpuMs(): number; stop(): void } {
  let worst = 0;
  let worstCpu = 0;
  let last = performance.now();
  let lastCpu = process.threadCpuUsage();
  const tick = setInterval(() => {
    const t = performance.now();
    const cpu = process.threadCpuUsage(lastCpu);
    worst = Math.max(worst, t - last);
    worstCpu = Math.max(worstCpu, (cpu.user + cpu.system) / 1000);
    last = t;
    lastCpu = process.threadCpuUsage();
  }, everyMs);
  return { worstMs: () => worst, worstCpuMs: () => worstCpu, stop: () => clearInterval(tick) };
}
