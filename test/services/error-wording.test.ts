// Services name the field at fault and the next step; each edge says them in its own words: the API
// its query/body names and paths, the tool endpoint its argument names and tools (no /api/v1 path).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { AppError, describeError } from '../../src/domain/errors.ts';
import { createMemoryLimiter } from '../../src/limiter/memory.ts';
import { HTTP_WORDING } from '../../src/http/plugins/errors.ts';
import { toolError } from '../../src/mcp/errors.ts';
import type { Core } from '../../src/services/core.ts';
import { createDomainRegistry } from '../../src/services/domains.ts';
import { createInbox } from '../../src/services/inboxes.ts';
import { authenticate, mintKey } from '../../src/services/keys.ts';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts';

const mcpText = (err: unknown) => (toolError(err).content[0] as { text: string }).text;

/** The AppError `run` is refused with. */
async function refusal(run: () => Promise<unknown>): Promise<AppError> {
  try {
    await run();
  } catch (err) {
    assert.ok(err instanceof AppError);
    return err;
  }
  throw new Error('not refused');
}

test('createInbox refusals: local_part / name, the domains list, the occupied address', async () => {
  const store = createSqliteStore(':memory:');
  const config = loadConfig({ EPHEMAIL_DOMAINS: 'ephemail.test' });
  const clock = { now: () => Date.now() };
  const domains = createDomainRegistry({ config, store: store.domains, clock, log: pino({ level: 'silent' }) });
  await domains.refresh();
  const core = { config, store, clock, domains } as unknown as Core;
  try {
    const bad = await refusal(() => createInbox(core, { localPart: '-x', randomLength: 10 }));
    assert.match(describeError(bad, HTTP_WORDING), /^local_part must match/);
    assert.match(mcpText(bad), /Error \(invalid_request\): name must match/);
    const domain = await refusal(() => createInbox(core, { domain: 'other.test', randomLength: 10 }));
    assert.equal(describeError(domain, HTTP_WORDING), 'domain "other.test" is not an active domain; use one of: ephemail.test (GET /api/v1/domains)');
    assert.doesNotMatch(mcpText(domain), /\/api\/v1/);
    const raw = new TextEncoder().encode('Subject: x\r\n\r\nx');
    await store.addEmails([{ address: 'taken@ephemail.test', sender: 's', mailedBy: null, subject: 'x', hasAttachments: false, receivedAt: Date.now(), expiresAt: Date.now() + 60_000, raw }]);
    const taken = await refusal(() => createInbox(core, { localPart: 'taken', randomLength: 10 }));
    assert.match(describeError(taken, HTTP_WORDING), /DELETE \/api\/v1\/inboxes\/taken@ephemail\.test\/emails\) or omit local_part/);
    assert.match(mcpText(taken), /Omit name to get a random empty address/);
    assert.doesNotMatch(mcpText(taken), /\/api\/v1|local_part/);
  } finally {
    await store.close();
  }
});

test('key refusals: the service names the next step (create a key), the API says its path', async () => {
  const store = createSqliteStore(':memory:');
  const core = { config: loadConfig({}), keys: store, limiter: createMemoryLimiter(), clock: { now: () => Date.now() } } as unknown as Core;
  try {
    const refused = (raw: string) => refusal(async () => authenticate(core, raw));
    const { apiKey, record } = await mintKey(core, { label: 'w' }, 'ip:127.0.0.1');
    for (const err of [await refused('not a key'), await refused(apiKey.slice(0, -1) + (apiKey.endsWith('A') ? 'B' : 'A'))]) {
      assert.equal(err.type, 'unauthorized');
      assert.doesNotMatch(err.message, /\/api\/v1|POST|GET/, 'the service speaks no transport');
      assert.match(describeError(err, HTTP_WORDING), /^The API key is not valid .*create a new one with POST \/api\/v1\/keys$/);
    }
    await store.revokeKeys(record.prefix, Date.now());
    const revoked = await refused(apiKey);
    assert.doesNotMatch(revoked.message, /\/api\/v1/);
    assert.equal(describeError(revoked, HTTP_WORDING), `The API key ${record.prefix}… was revoked by the operator; create a new one with POST /api/v1/keys`);
  } finally {
    await store.close();
  }
});
