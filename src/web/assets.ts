// The pages' static files (src/web/assets/): a stylesheet and native ES modules, read once at start
// and served under a content hash, cached for a year. A module's imports (`from './list.js'`) are
// rewritten to the hashed names, so a change to any module changes the name of every module that
// imports it, up to the entry the pages name: no build step, and no stale module from a cache.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Assets } from './pages.ts';

export interface Asset {
  path: string;
  type: string;
  body: Buffer;
}

const DIR = new URL('./assets/', import.meta.url);
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
/** A static import or re-export of a sibling module: `from './name.js'`. */
const IMPORT_RE = /(\bfrom\s*['"])\.\/([a-z0-9-]+\.js)(['"])/g;

export function loadAssets(): { urls: Assets; byPath: Map<string, Asset> } {
  const byPath = new Map<string, Asset>();
  const files = new Set(readdirSync(DIR).filter((f) => /^[a-z0-9-]+\.(?:js|css)$/.test(f)));
  const done = new Map<string, string>(); // file → its served path
  const serve = (file: string, seen: string[] = []): string => {
    const known = done.get(file);
    if (known) return known;
    if (!files.has(file) || seen.includes(file)) throw new Error(`web assets: ${file} is missing or imported in a cycle (${[...seen, file].join(' → ')})`);
    let text = readFileSync(new URL(file, DIR), 'utf8');
    if (file.endsWith('.js')) text = text.replace(IMPORT_RE, (_m, head: string, dep: string, tail: string) => `${head}.${serve(dep, [...seen, file]).slice('/web/assets'.length)}${tail}`);
    const body = Buffer.from(text);
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 10);
    const [name, ext] = file.split('.');
    const path = `/web/assets/${name}.${hash}.${ext}`;
    byPath.set(path, { path, type: TYPES[ext], body });
    done.set(file, path);
    return path;
  };
  return { urls: { js: serve('app.js'), css: serve('app.css') }, byPath };
}
