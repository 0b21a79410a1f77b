// A node's /metrics (prom-client text) read by a test: one series' value, so a test can wait for a
// gauge (`until(async () => (await metric(http, 'ephemail_waits_held')) === 1, ...)`) instead of sleeping.

/** The value of `series` (a name, with its labels if any, as written) at `${base}/metrics`; 0 when absent. */
export async function metric(base: string, series: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}
