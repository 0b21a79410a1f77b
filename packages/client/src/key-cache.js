// The user's key cache (Node only): the API keys the clients minted, by service base URL, so a
// re-run mints nothing (a service lets one IP mint 3 keys a day by default). One JSON file shared by
// this package, its `ephemail-client` command and the Python client:
//   $EPHEMAIL_KEY_CACHE, else $XDG_CACHE_HOME/ephemail/keys.json, else ~/.cache/ephemail/keys.json
//   { "version": 1, "keys": { "<base URL>": { "api_key": "eph_…", "minted_at": "<ISO time>" } } }
// The file is the user's alone (mode 600, its folder 700) and replaced whole on each write (a
// temporary file renamed over it). EPHEMAIL_KEY_CACHE=off keeps no cache.
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** The cache file, or null when caching is off. */
export function keyCachePath(env = process.env) {
  if (env.EPHEMAIL_KEY_CACHE === 'off') return null;
  if (env.EPHEMAIL_KEY_CACHE) return env.EPHEMAIL_KEY_CACHE;
  const base = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME.startsWith('/') ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(base, 'ephemail', 'keys.json');
}

function load(path) {
  try {
    const data = JSON.parse(readFileSync(path, 'utf8'));
    return data && typeof data === 'object' && data.keys && typeof data.keys === 'object' ? data : { version: 1, keys: {} };
  } catch {
    return { version: 1, keys: {} };
  }
}

function save(path, data) {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** A cache on the file at `path` (keyCachePath() by default): get, set and forget a base URL's key. */
export function fileKeyCache(path = keyCachePath()) {
  return {
    path,
    get(baseUrl) {
      if (!path) return null;
      const entry = load(path).keys[baseUrl];
      return entry && typeof entry.api_key === 'string' && entry.api_key ? entry.api_key : null;
    },
    set(baseUrl, apiKey) {
      if (!path) return;
      const data = load(path);
      data.keys[baseUrl] = { api_key: apiKey, minted_at: new Date().toISOString() };
      save(path, data);
    },
    forget(baseUrl, apiKey) {
      if (!path) return;
      const data = load(path);
      if (data.keys[baseUrl]?.api_key !== apiKey) return;
      delete data.keys[baseUrl];
      save(path, data);
    },
  };
}
