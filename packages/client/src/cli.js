// `ephemail-client` (`npx @ephemail/client …`): the client's helpers as a shell command for CI steps.
//   ADDR=$(npx @ephemail/client inbox)
//   CODE=$(npx @ephemail/client wait "$ADDR" --code --subject verify)
// Built on this package's own client (createEphemail): the same redirect rule and body cap (64 MiB).
// Exit 0 with the answer on stdout; 1 with one line on stderr when the wait runs out, the service
// refuses or answers with something unusable; 2 on a usage error.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createEphemail, EphemailError, EphemailTimeoutError, idAt, LINK_KINDS } from './index.js';
import { fileKeyCache, keyCachePath } from './key-cache.js';

export const DEFAULT_URL = 'http://localhost:8025';

/** The link kinds `--link` accepts: the `kind` enum of the OpenAPI schema `Link` (checked by test/client/cli.test.ts). */
export { LINK_KINDS };

/**
 * Every response field this command (and the client calls it makes) reads, as
 * [operation, status, JSON path]; `[]` steps into array items, ['headers', name] is a response header. test/client/cli.test.ts checks each
 * against the live OpenAPI document (present and required), so a renamed field fails it.
 */
export const READS = [
  ['POST /api/v1/keys', '201', ['data', 'api_key']],
  ['POST /api/v1/inboxes', '201', ['data', 'address']],
  ['GET /api/v1/inboxes/{address}/latest', '200', ['data', 'id']],
  ['GET /api/v1/inboxes/{address}/latest', '200', ['data', 'subject']],
  ['GET /api/v1/inboxes/{address}/latest', '200', ['data', 'codes', '[]', 'value']],
  ['GET /api/v1/inboxes/{address}/latest', '200', ['data', 'links', '[]', 'url']],
  ['GET /api/v1/inboxes/{address}/latest', '200', ['data', 'links', '[]', 'kind']],
  ['GET /api/v1/inboxes/{address}/latest', '429', ['error', 'type']],
  ['GET /api/v1/inboxes/{address}/latest', '429', ['error', 'message']],
  ['GET /api/v1/inboxes/{address}/latest', '429', ['headers', 'retry-after']],
];

export const HELP = `ephemail-client: wait for an email from an ephemail service, in a shell step.

Usage:
  ephemail-client inbox [--domain <d>] [--local-part <name>]
      Prints a new, empty address (random at the default domain unless given).
  ephemail-client wait <address> [--code | --link <kind> | --json]
                       [--subject <s>] [--from <f>] [--since <id|time>] [--timeout <seconds>]
      Waits for the newest email at <address> that matches, and prints:
        --code          its verification code (the best one: what a user would type)
        --link <kind>   the URL of its first link of that kind: ${LINK_KINDS.join(', ')}
        --json          the whole email as JSON (codes, links, bodies, headers, attachments)
        (none)          its id
      --subject, --from  case-insensitive substrings of the decoded Subject / From
      --since            only mail after this email id or ISO 8601 time (default: any mail in the
                         inbox; an address from \`inbox\` is empty when made)
      --timeout          seconds to wait in all (default 60)
  ephemail-client key
      Prints the key this user's clients minted for the service before (the key cache), else mints
      a free one, remembers it and prints it (export it as EPHEMAIL_API_KEY to name it).
  ephemail-client --help | --version

Environment:
  EPHEMAIL_URL      the service (default ${DEFAULT_URL}); --url <url> overrides it
  EPHEMAIL_API_KEY  the key for held waits; without one, \`wait\` uses the key minted for the
                    service before, else mints one and remembers it (a service lets one IP mint 3
                    a day by default)
  EPHEMAIL_KEY_CACHE  the file of remembered keys (mode 600; default
                    $XDG_CACHE_HOME/ephemail/keys.json or ~/.cache/ephemail/keys.json; off: none)

Exit status: 0 with the answer on stdout; 1 with one line on stderr when nothing arrived in time,
the email has no code or link of that kind, or the service refused, could not be reached, or
answered with something unusable (not JSON, a body over 64 MiB, a redirect to another origin:
never followed, so the key is not sent there); 2 on a usage error.

Example (a CI step):
  ADDR=$(npx @ephemail/client inbox)
  curl -fsS -X POST "$APP_URL/signup" --data-urlencode "email=$ADDR"
  CODE=$(npx @ephemail/client wait "$ADDR" --code --subject verify)
`;

class UsageError extends Error {}

/** An answer without a field this command reads (a service and client of different versions). */
class ContractError extends Error {}

/** The fields of the email in `latest`'s `data` that READS lists (checked on each answer). */
const EMAIL_FIELDS = [...new Set(READS.filter(([op, status, path]) => op.endsWith('/latest') && status === '200' && path[0] === 'data').map(([, , path]) => path[1]))];

/** `value` when it is a string, else a ContractError naming the field and the operation. */
function needString(value, field, op) {
  if (typeof value !== 'string') throw new ContractError(`the service's answer to ${op} has no "${field}": the service and this client (${version()}) disagree on the API`);
  return value;
}

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  url: { type: 'string' },
  code: { type: 'boolean' },
  link: { type: 'string' },
  json: { type: 'boolean' },
  subject: { type: 'string' },
  from: { type: 'string' },
  since: { type: 'string' },
  timeout: { type: 'string' },
  domain: { type: 'string' },
  'local-part': { type: 'string' },
};

/** Which options each command takes (the rest are usage errors there). */
const ALLOWED = {
  inbox: ['url', 'domain', 'local-part'],
  wait: ['url', 'code', 'link', 'json', 'subject', 'from', 'since', 'timeout'],
  key: ['url'],
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `--since`: an email id as is, or a time (ISO 8601, or epoch milliseconds) as a UUIDv7 cursor. */
function sinceCursor(value) {
  if (UUID.test(value)) return value;
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) throw new UsageError(`--since wants an email id or an ISO 8601 time, got "${value}"`);
  return idAt(ms);
}

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    const e = /** @type {{ code?: string, message?: string }} */ (err);
    const unknown = e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && /'([^']+)'/.exec(e.message ?? '');
    throw new UsageError(unknown ? `unknown option ${unknown[1]}` : String(e.message ?? err).split('\n')[0]);
  }
  const { values, positionals } = parsed;
  if (values.help || values.version) return { command: values.help ? 'help' : 'version', values, positionals: [] };
  const [command, ...rest] = positionals;
  if (command === undefined) throw new UsageError('a command is needed: inbox, wait or key');
  if (command === 'help') return { command: 'help', values, positionals: [] };
  if (!(command in ALLOWED)) throw new UsageError(`unknown command "${command}" (inbox, wait or key)`);
  for (const name of Object.keys(values)) {
    if (!ALLOWED[command].includes(name)) throw new UsageError(`--${name} does not apply to "${command}"`);
  }
  if (command === 'wait') {
    if (rest.length !== 1) throw new UsageError(rest.length ? `wait takes one address, got ${rest.length} arguments` : 'wait needs an address: wait <address>');
    const outputs = ['code', 'link', 'json'].filter((k) => values[k] !== undefined && values[k] !== false);
    if (outputs.length > 1) throw new UsageError(`--${outputs.join(', --')}: choose one`);
    if (values.link !== undefined && !LINK_KINDS.includes(values.link)) throw new UsageError(`--link wants one of ${LINK_KINDS.join(', ')}, got "${values.link}"`);
    if (values.timeout !== undefined && !(/^\d+(\.\d+)?$/.test(values.timeout) && Number(values.timeout) > 0)) throw new UsageError(`--timeout wants seconds (a number above 0), got "${values.timeout}"`);
    if (values.since !== undefined) sinceCursor(values.since);
  } else if (rest.length) {
    throw new UsageError(`${command} takes no arguments, got "${rest[0]}"`);
  }
  return { command, values, positionals: rest };
}

function version() {
  return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
}

/** One line naming what went wrong (the service's message, or why it could not be reached). */
function describe(err, baseUrl) {
  if (err instanceof EphemailError) return err.message;
  if (err instanceof TypeError && /fetch failed/.test(err.message)) {
    // undici: the cause is the socket's error (ECONNREFUSED, …) or an AggregateError of them
    const cause = /** @type {any} */ (err).cause;
    const why = cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message;
    return `cannot reach ${baseUrl}${why ? ` (${why})` : ''}: is ephemail running there? (EPHEMAIL_URL)`;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * Runs one command line. Resolves with the exit status; writes the answer to `io.stdout` and
 * messages (one line each) to `io.stderr`.
 * @param {string[]} argv
 * @param {Record<string, string | undefined>} env
 * @param {{ stdout: { write(s: string): unknown }, stderr: { write(s: string): unknown } }} io
 */
export async function main(argv, env, io) {
  const fail = (status, message) => {
    io.stderr.write(`ephemail-client: ${String(message).replace(/\s*\n\s*/g, ' ')}\n`);
    return status;
  };
  let cmd;
  try {
    cmd = parse(argv);
  } catch (err) {
    if (err instanceof UsageError) return fail(2, `${err.message} (see ephemail-client --help)`);
    throw err;
  }
  const { command, values, positionals } = cmd;
  if (command === 'help') {
    io.stdout.write(HELP);
    return 0;
  }
  if (command === 'version') {
    io.stdout.write(`${version()}\n`);
    return 0;
  }
  const baseUrl = values.url ?? (env.EPHEMAIL_URL || DEFAULT_URL);
  if (!/^https?:\/\/[^/]/.test(baseUrl)) return fail(2, `the service URL must start with http:// or https://, got "${baseUrl}" (EPHEMAIL_URL or --url)`);
  const mail = createEphemail({ baseUrl, apiKey: env.EPHEMAIL_API_KEY || undefined, keyCache: fileKeyCache(keyCachePath(env)) });
  try {
    if (command === 'inbox') {
      const body = {};
      if (values.domain !== undefined) body.domain = values.domain;
      if (values['local-part'] !== undefined) body.local_part = values['local-part'];
      const inbox = await mail.createInbox(body);
      io.stdout.write(`${needString(inbox.address, 'data.address', 'POST /api/v1/inboxes')}\n`);
      return 0;
    }
    if (command === 'key') {
      io.stdout.write(`${needString(await mail.ensureKey(), 'data.api_key', 'POST /api/v1/keys')}\n`);
      return 0;
    }
    // wait
    const [address] = positionals;
    const seconds = values.timeout === undefined ? 60 : Number(values.timeout);
    try {
      needString(await mail.ensureKey(), 'data.api_key', 'POST /api/v1/keys');
    } catch (err) {
      if (err instanceof EphemailError && err.status === 429) {
        return fail(1, `cannot mint an API key for the wait: ${err.message}`);
      }
      throw err;
    }
    const filters = {
      subject: values.subject,
      from: values.from,
      // no --since: any mail in the inbox (this process did not see the inbox being made)
      since: values.since === undefined ? idAt(0) : sinceCursor(values.since),
      timeoutMs: Math.round(seconds * 1000),
    };
    const inbox = mail.inbox(address);
    let email;
    try {
      email = await inbox.waitForEmail(filters);
    } catch (err) {
      if (err instanceof EphemailTimeoutError) {
        const what = `${values.from !== undefined ? ` from "${values.from}"` : ''}${values.subject !== undefined ? ` with subject "${values.subject}"` : ''}`;
        return fail(1, `timed out: no email${what} at ${address} within ${seconds} s`);
      }
      throw err;
    }
    const absent = EMAIL_FIELDS.filter((f) => !(f in email));
    if (absent.length) {
      throw new ContractError(`the service's answer to GET /api/v1/inboxes/{address}/latest has no ${absent.map((f) => `"data.${f}"`).join(', ')}: the service and this client (${version()}) disagree on the API`);
    }
    if (values.code) {
      const code = email.codes[0];
      if (!code) return fail(1, `the email ${email.id} ("${email.subject}") has no verification code`);
      io.stdout.write(`${code.value}\n`);
    } else if (values.link !== undefined) {
      const link = email.links.find((l) => l.kind === values.link);
      if (!link) return fail(1, `the email ${email.id} ("${email.subject}") has no ${values.link} link`);
      io.stdout.write(`${link.url}\n`);
    } else if (values.json) {
      io.stdout.write(`${JSON.stringify(email, null, 2)}\n`);
    } else {
      io.stdout.write(`${email.id}\n`);
    }
    return 0;
  } catch (err) {
    return fail(1, describe(err, baseUrl));
  }
}
