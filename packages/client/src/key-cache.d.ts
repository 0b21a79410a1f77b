import type { KeyCache } from './index.js';

/** The cache file: EPHEMAIL_KEY_CACHE, else $XDG_CACHE_HOME/ephemail/keys.json, else ~/.cache/ephemail/keys.json; null when EPHEMAIL_KEY_CACHE=off. */
export declare function keyCachePath(env?: Record<string, string | undefined>): string | null;
/** A key cache on the file at `path` (mode 600, its folder 700). */
export declare function fileKeyCache(path?: string | null): KeyCache & { readonly path: string | null };
