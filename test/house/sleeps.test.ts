// Tests wait for what they observe (test/helpers/time.ts): every fixed sleep left in test/ says why in
// a one-line tagged comment on its line or the line above, and so does every elapsed-time assert, so
// the count cannot creep back. The tags are listed in test/helpers/time.ts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '..');

/** A timer that resolves a promise (a sleep), a sleep()/delay() call, Playwright's fixed wait, the timers' promise API. */
const SLEEP = /setTimeout\(\s*(?:r|res|resolve|done|ok|wake)\s*,|(?<![\w.])(?:sleep|delay)\(|\.waitForTimeout\(|node:timers\/promises/;
const DEFINES = /^\s*(?:export )?(?:const|function) (?:sleep|delay)\b/;
const SLEEP_TAG = /\/\/ (?:quiet window|poll|slow on purpose|unobservable): \S/;
/** An assert on the time between two readings of the clock, or on a variable named for one. */
const ELAPSED = /assert[.\w]*\(.*(?:(?:Date|performance)\.now\(\)\s*-\s*[A-Za-z_]|\b(?:ms|elapsed|took|answeredIn|perLookup|worstHealth|afterMs|healthMs|\w+\.ms)\s*[<>]|\btime\(\(\) =>)/;
const ELAPSED_TAG = /\/\/ bound: \S/;

function files(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) files(p, out);
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** `file:line: text` of each line matching `what` without `tag` on it or on the line above. */
function untagged(what: RegExp, tag: RegExp): string[] {
  const found: string[] = [];
  for (const file of files(ROOT)) {
    if (file === import.meta.filename) continue;
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (DEFINES.test(line)) return; // a sleep helper's definition: its calls are checked
      if (what.test(line) && !tag.test(line) && !(i > 0 && tag.test(lines[i - 1]))) found.push(`test/${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

test('every fixed sleep in test/ says why (// quiet window: | poll: | slow on purpose: | unobservable: ...)', () => {
  const found = untagged(SLEEP, SLEEP_TAG);
  assert.deepEqual(found, [], `wait for what the test observes (until(), a gauge, an event, a movable clock), or tag the sleep:\n${found.join('\n')}`);
});

test('every elapsed-time assert in test/ says why it is a bound (// bound: ...)', () => {
  const found = untagged(ELAPSED, ELAPSED_TAG);
  assert.deepEqual(found, [], `use a movable clock or an observable, or keep a generous one-sided bound and tag it:\n${found.join('\n')}`);
});

test('the checker sees what it looks for', () => {
  for (const line of ['await new Promise((r) => setTimeout(r, 50));', 'await sleep(200);', "await page.waitForTimeout(150);", "import { setTimeout } from 'node:timers/promises';"]) assert.match(line, SLEEP, line);
  for (const line of ['const t = setTimeout(() => reject(new Error()), ms);', 'until(() => x, "y")']) assert.doesNotMatch(line, SLEEP, line);
  assert.match('assert.ok(Date.now() - t0 < 2000);', ELAPSED);
  assert.match('assert.ok(performance.now() - started < 5000, "x");', ELAPSED);
  assert.match('assert.ok(elapsed >= 1000 && elapsed < 12_000);', ELAPSED);
  assert.match('assert.ok(viaApi.ms < 10_000);', ELAPSED);
  assert.match('assert.ok(time(() => f()) < 200);', ELAPSED);
  assert.doesNotMatch("await assert.rejects(r.resolve('late.test', 'TXT', Date.now() - 1));", ELAPSED);
});
