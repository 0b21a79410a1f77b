// A pure function with a memory of its latest answers: a client sends the same key, the same address
// on every request. Its own state (the caller makes one); at most `max` inputs are remembered, then
// the memory starts again.
export function remembering<T>(fn: (input: string) => T, max = 1024): (input: string) => T {
  const seen = new Map<string, T>();
  return (input) => {
    // one look-up in the common case (has() only to tell a remembered undefined from none)
    const hit = seen.get(input);
    if (hit !== undefined || seen.has(input)) return hit as T;
    const out = fn(input);
    if (seen.size >= max) seen.clear();
    seen.set(input, out);
    return out;
  };
}
