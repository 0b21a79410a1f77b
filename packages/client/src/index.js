// @ephemail/client: the typed API (openapi-fetch over the service's OpenAPI types) and the helpers a
// test needs — create an inbox, wait for the email, get its code or link, expect no email. Fetch
// only: Node 22+ and browsers (in Node, the keys it mints are remembered per service: key-cache.js). Waiting uses the server's `latest?wait=` (held requests, no polling
// storm), loops within a total timeout, and honours retry-after on 429. Every answer is read through
// one guarded fetch: no redirect to another origin is followed (the API key stays with the service),
// bodies are read up to `maxBodyBytes`, and any answer the client cannot use is an EphemailError.
import createClient from 'openapi-fetch';

/** An error answered by the service: `type` is the spec's error type (not_found, rate_limited, …). */
/**
 * The link kinds of the contract (the `kind` enum of the OpenAPI schema `Link`), and those of a main
 * action link (the server's ACTION_KINDS, src/domain/extract/links.ts): re-declared here, as this
 * package ships without the server; test/client/cli.test.ts checks both against the server's.
 */
export const LINK_KINDS = ['verify', 'reset_password', 'login', 'unsubscribe', 'view_online', 'other'];
export const ACTION_LINK_KINDS = ['verify', 'reset_password', 'login'];

export class EphemailError extends Error {
  constructor(type, message, status, retryAfter) {
    super(message);
    this.name = 'EphemailError';
    this.type = type;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/** A wait that ran out of time. */
export class EphemailTimeoutError extends EphemailError {
  constructor(message) {
    super('timeout', message, 0, null);
    this.name = 'EphemailTimeoutError';
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The largest answer body the client reads by default (64 MiB); `maxBodyBytes` changes it. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Same-origin redirects followed in a row before giving up. */
const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Statuses whose Response has no body. */
const NULL_BODY = new Set([101, 204, 205, 304]);

function bytesText(n) {
  return n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
}

/** "GET /api/v1/emails/…" for messages: the method and the path (no query: it may hold cursors). */
function what(request) {
  return `${request.method} ${new URL(request.url).pathname}`;
}

/**
 * A fetch that (1) follows redirects itself and only within the request's own origin (scheme, host,
 * port): a redirect elsewhere is refused before anything is sent there, so the API key never leaves
 * the service; (2) reads the body, up to `maxBodyBytes`, and answers a Response holding those bytes;
 * a larger body (declared or streamed) is refused as soon as it is known, without reading the rest.
 */
function guardedFetch(fetchImpl, maxBodyBytes) {
  return async function fetchGuarded(input, init) {
    const first = new Request(input, init);
    const origin = new URL(first.url).origin;
    let { method } = first;
    let headers = new Headers(first.headers);
    let body = method === 'GET' || method === 'HEAD' ? undefined : await first.arrayBuffer();
    let url = first.url;
    for (let hops = 0; ; hops++) {
      const request = new Request(url, { method, headers, body, redirect: 'manual', signal: first.signal });
      const res = await fetchImpl(request);
      if (res.type === 'opaqueredirect') {
        // a browser hides a redirect's target: it cannot be checked, so it is not followed
        throw new EphemailError('redirect_refused', `${what(request)}: the service answered a redirect; not followed (point baseUrl at the address the service answers on)`, 0, null);
      }
      if (REDIRECT_STATUSES.has(res.status) && res.headers.has('location')) {
        await res.body?.cancel().catch(() => {});
        const target = new URL(res.headers.get('location') ?? '', url);
        if (target.origin !== origin) {
          throw new EphemailError('redirect_refused', `${what(request)}: the service redirected to another origin (${target.origin}); refused, so the API key is not sent there (point baseUrl at the address the service answers on)`, res.status, null);
        }
        if (hops >= MAX_REDIRECTS) throw new EphemailError('redirect_refused', `${what(request)}: more than ${MAX_REDIRECTS} redirects`, res.status, null);
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
          method = 'GET';
          body = undefined;
          headers = new Headers(headers);
          headers.delete('content-type');
        }
        url = target.href;
        continue;
      }
      return readCapped(res, request, maxBodyBytes);
    }
  };
}

/** `res` with its body read into memory, at most `max` bytes; larger: an EphemailError. */
async function readCapped(res, request, max) {
  const tooLarge = () => new EphemailError('response_too_large', `${what(request)}: the service's answer is larger than ${bytesText(max)} (maxBodyBytes); not read`, res.status, null);
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body || NULL_BODY.has(res.status)) return res;
  const reader = res.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    let step;
    try {
      step = await reader.read();
    } catch (err) {
      throw Object.assign(new EphemailError('connection_error', `${what(request)}: the service's answer was cut off (${err?.cause?.code ?? err?.message ?? err})`, res.status, null), { cause: err });
    }
    if (step.done) break;
    total += step.value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(step.value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return new Response(bytes, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** `body` when it is a JSON object with `data` (the API's envelope); an EphemailError otherwise. */
function envelope(text, response, op) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new EphemailError('invalid_response', `${op}: the service's answer (HTTP ${response.status}) is not JSON`, response.status, null);
  }
  if (body === null || typeof body !== 'object' || !('data' in body)) {
    throw new EphemailError('invalid_response', `${op}: the service's answer (HTTP ${response.status}) has no "data"`, response.status, null);
  }
  return body;
}

/** `data[field]` when `ok(value)`; an EphemailError naming the field otherwise (service and client of different versions). */
function field(data, name, ok, op) {
  const value = data !== null && typeof data === 'object' ? data[name] : undefined;
  if (!ok(value)) throw new EphemailError('invalid_response', `the service's answer to ${op} has no "data.${name}": the service and this client disagree on the API`, 0, null);
  return value;
}
const isString = (v) => typeof v === 'string';
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `latest`'s data: an email or null; anything else is an EphemailError. */
function latestEmail(data) {
  if (data === null || isObject(data)) return data;
  throw new EphemailError('invalid_response', `the service's answer to GET /api/v1/inboxes/{address}/latest has no email or null in "data"`, 200, null);
}

/** A UUIDv7 made from a time: "only mail from now on" as a `since` cursor. */
export function idAt(ms = Date.now()) {
  const t = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8)}-7000-8000-000000000000`;
}

/** The EphemailError of an error answer: its envelope's type and message, else one from the status. */
function errorOf(res, body) {
  const e = body !== null && typeof body === 'object' ? body.error : undefined;
  const type = e && typeof e.type === 'string' ? e.type : res.status >= 500 ? 'internal_error' : 'http_error';
  const message = e && typeof e.message === 'string' ? e.message : `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  const retry = Number(res.headers.get('retry-after'));
  return new EphemailError(type, message, res.status, Number.isFinite(retry) && retry > 0 ? retry : null);
}

/**
 * The default key cache: in Node, the user's cache file (./key-cache.js: EPHEMAIL_KEY_CACHE, else
 * $XDG_CACHE_HOME or ~/.cache/ephemail/keys.json); elsewhere none. Loaded only when a key is needed,
 * by URL, so a bundle for the browser never includes the file code.
 */
async function defaultKeyCache() {
  if (!globalThis.process?.versions?.node) return null;
  const { fileKeyCache } = await import(new URL('./key-cache.js', import.meta.url).href);
  return fileKeyCache();
}

/** "2026-11-28T05:12:00Z": when a refused mint may be tried again. */
function whenAgain(retryAfter) {
  return new Date(Date.now() + (retryAfter ?? 0) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * A client for one ephemail service.
 * @param {{ baseUrl?: string, apiKey?: string, fetch?: typeof fetch, maxBodyBytes?: number, keyCache?: false | { get(baseUrl: string): string | null | Promise<string | null>, set(baseUrl: string, apiKey: string): unknown, forget(baseUrl: string, apiKey: string): unknown } }} [options]
 */
export function createEphemail(options = {}) {
  const baseUrl = (options.baseUrl ?? 'http://localhost:8025').replace(/\/+$/, '');
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!(Number.isSafeInteger(maxBodyBytes) && maxBodyBytes > 0)) throw new TypeError(`maxBodyBytes wants a whole number of bytes above 0, got ${maxBodyBytes}`);
  const fetchImpl = guardedFetch(options.fetch ?? globalThis.fetch.bind(globalThis), maxBodyBytes);
  let apiKey = options.apiKey ?? null;
  let minting = null;
  /** The key came from the key cache: an answer 401 to it means it is gone (another service, a new store): mint again. */
  let keyFromCache = false;
  /** The key cache (a key given is never cached; `keyCache: false`: none). */
  let keyCache = options.keyCache === false ? Promise.resolve(null) : options.keyCache ? Promise.resolve(options.keyCache) : null;
  const cache = () => (keyCache ??= defaultKeyCache().catch(() => null));
  const headers = () => (apiKey ? { authorization: `Bearer ${apiKey}` } : {});
  const api = createClient({ baseUrl, fetch: fetchImpl });

  /**
   * Runs one operation (`method`, `path`: the spec's), retrying 429s after their retry-after (at most
   * until `deadline`); resolves with the answer's `data` (undefined for a 204).
   */
  async function call(method, path, options = {}, deadline = Date.now() + 60_000) {
    const op = `${method} ${path}`;
    for (;;) {
      const sent = apiKey;
      const { data, error, response } = await api[method](path, { ...options, headers: headers(), parseAs: 'text' });
      if (response.ok) return response.status === 204 || data === undefined ? undefined : envelope(data, response, op).data;
      const err = errorOf(response, error);
      if (response.status === 401 && keyFromCache && sent !== null && sent === apiKey) {
        // a remembered key this service does not know (revoked, or a new store on the same URL)
        await (await cache())?.forget(baseUrl, sent);
        apiKey = null;
        keyFromCache = false;
        minting = null;
        await ensureKey();
        continue;
      }
      if (response.status === 429 && err.retryAfter !== null && Date.now() + err.retryAfter * 1000 < deadline) {
        await sleep(err.retryAfter * 1000);
        continue;
      }
      throw err;
    }
  }

  /**
   * The key in use when a wait needs one and none was given: the one this user's clients minted for
   * this base URL before (the key cache), else a free key minted now, once, and remembered.
   */
  async function ensureKey() {
    if (apiKey) return apiKey;
    minting ??= (async () => {
      const keys = await cache();
      const remembered = await keys?.get(baseUrl);
      if (remembered) {
        apiKey = remembered;
        keyFromCache = true;
        return;
      }
      let data;
      try {
        data = await call('POST', '/api/v1/keys', { body: { label: '@ephemail/client' } });
      } catch (err) {
        if (err instanceof EphemailError && err.status === 429) {
          throw new EphemailError(err.type, `${err.message.replace(/\s*$/, '')} Set EPHEMAIL_API_KEY (or pass apiKey) to a key you have, or try again after ${whenAgain(err.retryAfter)}.`, err.status, err.retryAfter);
        }
        throw err;
      }
      const key = field(data, 'api_key', isString, 'POST /api/v1/keys');
      apiKey = key;
      keyFromCache = false;
      try {
        await keys?.set(baseUrl, key);
      } catch {
        // an unwritable cache: the key serves this client; the next run mints again
      }
    })();
    await minting;
    return apiKey;
  }

  async function getEmail(id) {
    const data = await call('GET', '/api/v1/emails/{id}', { params: { path: { id } } });
    if (!isObject(data)) throw new EphemailError('invalid_response', `the service's answer to GET /api/v1/emails/{id} has no email in "data"`, 200, null);
    return withRaw(data);
  }

  function withRaw(email) {
    return Object.assign(email, {
      /** The message as received (bytes of the .eml). */
      async raw() {
        const res = await fetchImpl(`${baseUrl}/api/v1/emails/${encodeURIComponent(email.id)}/raw`, { headers: headers() });
        if (!res.ok) throw errorOf(res, await res.json().catch(() => null));
        return new Uint8Array(await res.arrayBuffer());
      },
    });
  }

  function inbox(address) {
    const created = Date.now();
    const path = { address };
    return {
      address,
      /** Emails in the inbox (summaries), newest first. */
      async emails(query = {}) {
        const data = await call('GET', '/api/v1/inboxes/{address}/emails', { params: { path, query } });
        if (!Array.isArray(data)) throw new EphemailError('invalid_response', `the service's answer to GET /api/v1/inboxes/{address}/emails has no list in "data"`, 200, null);
        return data;
      },
      /**
       * The newest email matching `from`/`subject` (case-insensitive substrings) that arrived after
       * `since` (default: when this inbox object was made), waiting up to `timeoutMs` for it.
       */
      async waitForEmail({ from, subject, since, timeoutMs = 30_000 } = {}) {
        await ensureKey();
        const deadline = Date.now() + timeoutMs;
        const cursor = since ?? idAt(created - 1000);
        for (;;) {
          const left = deadline - Date.now();
          const wait = Math.max(0, Math.min(30, Math.floor(left / 1000)));
          const data = latestEmail(await call('GET', '/api/v1/inboxes/{address}/latest', { params: { path, query: { wait, since: cursor, from, subject } } }, deadline));
          if (data) return withRaw(data);
          if (Date.now() >= deadline || wait === 0) throw new EphemailTimeoutError(`no email${from ? ` from "${from}"` : ''}${subject ? ` with subject "${subject}"` : ''} at ${address} within ${timeoutMs} ms`);
        }
      },
      /** The best verification code of the next matching email. */
      async waitForCode(filters = {}) {
        const email = await this.waitForEmail(filters);
        if (!email.codes.length) throw new EphemailError('no_code', `email ${email.id} ("${email.subject}") has no verification code`, 0, null);
        return email.codes[0].value;
      },
      /** The first link of `kind` (verify, reset_password, login, …; default: any action) of the next matching email. */
      async waitForLink({ kind, ...filters } = {}) {
        const email = await this.waitForEmail(filters);
        const kinds = kind ? [kind] : ACTION_LINK_KINDS;
        const link = email.links.find((l) => kinds.includes(l.kind));
        if (!link) throw new EphemailError('no_link', `email ${email.id} ("${email.subject}") has no ${kinds.join('/')} link`, 0, null);
        return link;
      },
      /** Resolves when no matching email arrives within `ms`; throws with the email otherwise. */
      async expectNoEmail(ms, { from, subject } = {}) {
        await ensureKey();
        const since = idAt();
        const deadline = Date.now() + ms;
        while (Date.now() < deadline) {
          const wait = Math.max(0, Math.min(30, Math.ceil((deadline - Date.now()) / 1000)));
          const data = latestEmail(await call('GET', '/api/v1/inboxes/{address}/latest', { params: { path, query: { wait, since, from, subject } } }));
          if (data) throw new EphemailError('unexpected_email', `expected no email at ${address}, got "${data.subject}" from ${data.sender}`, 0, null);
          if (wait === 0) break;
        }
      },
      /** Deletes every email of the inbox; resolves with how many. */
      async clear() {
        const data = await call('DELETE', '/api/v1/inboxes/{address}/emails', { params: { path } });
        return field(data, 'deleted', Number.isInteger, 'DELETE /api/v1/inboxes/{address}/emails');
      },
      /** SMTP faults on demand for this address (needs a key: one is minted once if none was given). */
      faults: {
        /** Adds a rule, e.g. `{ stage: 'rcpt', reply: '451 4.7.1 Try again later', times: 2 }`; resolves with it. */
        async add(rule) {
          await ensureKey();
          return call('POST', '/api/v1/inboxes/{address}/faults', { params: { path }, body: rule });
        },
        /** This key's rules on the address, in the order they apply. */
        async list() {
          await ensureKey();
          return call('GET', '/api/v1/inboxes/{address}/faults', { params: { path } });
        },
        /** Removes one rule by id. */
        async remove(id) {
          await ensureKey();
          await call('DELETE', '/api/v1/inboxes/{address}/faults/{id}', { params: { path: { ...path, id } } });
        },
        /** Removes this key's rules on the address; resolves with how many. */
        async clear() {
          await ensureKey();
          const data = await call('DELETE', '/api/v1/inboxes/{address}/faults', { params: { path } });
          return field(data, 'deleted', Number.isInteger, 'DELETE /api/v1/inboxes/{address}/faults');
        },
      },
    };
  }

  return {
    api,
    baseUrl,
    get apiKey() {
      return apiKey;
    },
    /** A new, empty inbox (random name at the default domain unless given). */
    async createInbox(body = {}) {
      const data = await call('POST', '/api/v1/inboxes', { body });
      return inbox(field(data, 'address', isString, 'POST /api/v1/inboxes'));
    },
    /** An inbox by address (inboxes are implicit: any address at an active domain). */
    inbox,
    getEmail,
    /** The key in use: the one given, or one minted now (once) if none was. */
    ensureKey,
  };
}
