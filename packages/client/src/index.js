// @ephemail/client: the typed API (openapi-fetch over the service's OpenAPI types) and the helpers a
// test needs — create an inbox, wait for the email, get its code or link, expect no email. Fetch
// only: Node 20+ and browsers. Waiting uses the server's `latest?wait=` (held requests, no polling
// storm), loops within a total timeout, and honours retry-after on 429.
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

/** A UUIDv7 made from a time: "only mail from now on" as a `since` cursor. */
export function idAt(ms = Date.now()) {
  const t = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8)}-7000-8000-000000000000`;
}

async function errorOf(res, body) {
  const e = body && body.error;
  const retry = Number(res.headers.get('retry-after'));
  return new EphemailError(e ? e.type : 'internal_error', e ? e.message : `HTTP ${res.status}`, res.status, Number.isFinite(retry) && retry > 0 ? retry : null);
}

/**
 * A client for one ephemail service.
 * @param {{ baseUrl?: string, apiKey?: string, fetch?: typeof fetch }} [options]
 */
export function createEphemail(options = {}) {
  const baseUrl = (options.baseUrl ?? 'http://localhost:8025').replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  let apiKey = options.apiKey ?? null;
  let minting = null;
  const headers = () => (apiKey ? { authorization: `Bearer ${apiKey}` } : {});
  const api = createClient({ baseUrl, fetch: fetchImpl });

  /** Runs one call, retrying 429s after their retry-after (at most until `deadline`). */
  async function call(fn, deadline = Date.now() + 60_000) {
    for (;;) {
      const { data, error, response } = await fn({ headers: headers() });
      if (response.ok) return data;
      const err = await errorOf(response, error);
      if (response.status === 429 && err.retryAfter !== null && Date.now() + err.retryAfter * 1000 < deadline) {
        await sleep(err.retryAfter * 1000);
        continue;
      }
      throw err;
    }
  }

  /** A free API key, minted once when a wait needs one and none was given; resolves with the key. */
  async function ensureKey() {
    if (apiKey) return apiKey;
    minting ??= call((init) => api.POST('/api/v1/keys', { ...init, body: { label: '@ephemail/client' } })).then((r) => {
      apiKey = r.data.api_key;
    });
    await minting;
    return apiKey;
  }

  async function getEmail(id) {
    const r = await call((init) => api.GET('/api/v1/emails/{id}', { ...init, params: { path: { id } } }));
    return withRaw(r.data);
  }

  function withRaw(email) {
    return Object.assign(email, {
      /** The message as received (bytes of the .eml). */
      async raw() {
        const res = await fetchImpl(`${baseUrl}/api/v1/emails/${encodeURIComponent(email.id)}/raw`, { headers: headers() });
        if (!res.ok) throw await errorOf(res, await res.json().catch(() => null));
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
        const r = await call((init) => api.GET('/api/v1/inboxes/{address}/emails', { ...init, params: { path, query } }));
        return r.data;
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
          const r = await call((init) => api.GET('/api/v1/inboxes/{address}/latest', { ...init, params: { path, query: { wait, since: cursor, from, subject } } }), deadline);
          if (r.data) return withRaw(r.data);
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
          const r = await call((init) => api.GET('/api/v1/inboxes/{address}/latest', { ...init, params: { path, query: { wait, since, from, subject } } }));
          if (r.data) throw new EphemailError('unexpected_email', `expected no email at ${address}, got "${r.data.subject}" from ${r.data.sender}`, 0, null);
          if (wait === 0) break;
        }
      },
      /** Deletes every email of the inbox; resolves with how many. */
      async clear() {
        const r = await call((init) => api.DELETE('/api/v1/inboxes/{address}/emails', { ...init, params: { path } }));
        return r.data.deleted;
      },
      /** SMTP faults on demand for this address (needs a key: one is minted once if none was given). */
      faults: {
        /** Adds a rule, e.g. `{ stage: 'rcpt', reply: '451 4.7.1 Try again later', times: 2 }`; resolves with it. */
        async add(rule) {
          await ensureKey();
          const r = await call((init) => api.POST('/api/v1/inboxes/{address}/faults', { ...init, params: { path }, body: rule }));
          return r.data;
        },
        /** This key's rules on the address, in the order they apply. */
        async list() {
          await ensureKey();
          const r = await call((init) => api.GET('/api/v1/inboxes/{address}/faults', { ...init, params: { path } }));
          return r.data;
        },
        /** Removes one rule by id. */
        async remove(id) {
          await ensureKey();
          await call((init) => api.DELETE('/api/v1/inboxes/{address}/faults/{id}', { ...init, params: { path: { ...path, id } } }));
        },
        /** Removes this key's rules on the address; resolves with how many. */
        async clear() {
          await ensureKey();
          const r = await call((init) => api.DELETE('/api/v1/inboxes/{address}/faults', { ...init, params: { path } }));
          return r.data.deleted;
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
      const r = await call((init) => api.POST('/api/v1/inboxes', { ...init, body }));
      return inbox(r.data.address);
    },
    /** An inbox by address (inboxes are implicit: any address at an active domain). */
    inbox,
    getEmail,
    /** The key in use: the one given, or one minted now (once) if none was. */
    ensureKey,
  };
}
