// Types of scripts/build.mjs (for bench/startup.ts).
export declare const OUT_DIR: string;
/** A hash of every file the bundle is made from. */
export declare function fingerprint(): string;
/** Builds the bundle; returns the main entry's path. */
export declare function build(): Promise<string>;
/** The URL of the main entry of a bundle of the current sources, building it if missing or stale. */
export declare function compiledEntry(): Promise<string>;
