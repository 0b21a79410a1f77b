// Types of the `ephemail-client` command's module (src/cli.js); the command itself is bin/ephemail-client.js.

/** The service when neither EPHEMAIL_URL nor --url is given. */
export declare const DEFAULT_URL: string;
/** The link kinds `--link` accepts (the OpenAPI `Link.kind` enum). */
export declare const LINK_KINDS: readonly string[];
/**
 * Every response field the command reads, as [operation ("GET /api/v1/…"), status, path]; `[]` steps
 * into array items and ['headers', name] names a response header.
 */
export declare const READS: ReadonlyArray<readonly [string, string, readonly string[]]>;
/** The text of --help. */
export declare const HELP: string;

export interface Io {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

/** Runs one command line; resolves with the exit status (0 answered, 1 failed or timed out, 2 usage). */
export declare function main(argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number>;
