// Types of scripts/build.mjs (for bench/startup.ts and scripts/test.mjs).
/** Where the bundle is written: dist/ at the repository's root. */
export declare const OUT_DIR: string;
/** dist/manifest.json of the last build. */
export interface Manifest {
  fingerprint: string;
  /** The main entry, relative to OUT_DIR. */
  main: string;
  /** Every output file of that build, relative to OUT_DIR (assets/ aside). */
  files?: string[];
}
/** A hash of every file the bundle is made from. */
export declare function fingerprint(): string;
/** dist/manifest.json; null if there is none. */
export declare function readManifest(): Manifest | null;
/** Whether dist/ holds a build of the current sources, all of its files present. */
export declare function isCurrent(manifest?: Manifest | null): boolean;
/** Builds the bundle; returns the main entry's path. */
export declare function build(): Promise<string>;
/** The URL of the main entry of a bundle of the current sources, building it if missing or stale. */
export declare function compiledEntry(): Promise<string>;
