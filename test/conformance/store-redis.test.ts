// Every store seam's conformance suite (mail, keys, webhooks, faults, domains) against the shared
// single Redis (own key prefix, removed afterwards).
import { withReadCache } from '../../src/store/read-cache.ts';
import { SKIP_REDIS, TEST_REDIS_URL } from '../redis/servers.ts';
import { redisHarness } from './redis-harness.ts';
import { keySuite } from './keys.suite.ts';
import { mailSuite } from './mail.suite.ts';
import { webhookSuite } from './webhooks.suite.ts';
import { faultSuite } from './faults.suite.ts';
import { domainSuite } from './domains.suite.ts';

const h = redisHarness(() => TEST_REDIS_URL);
mailSuite('redis', { open: h.open, cleanup: h.cleanup, skip: SKIP_REDIS });
keySuite('redis', { open: h.open, cleanup: h.cleanup, skip: SKIP_REDIS });
domainSuite('redis', { open: h.open, skip: SKIP_REDIS });
webhookSuite('redis', { open: h.open, cleanup: h.cleanup, skip: SKIP_REDIS, bodies: h.webhookBodies });
faultSuite('redis', { open: h.open, cleanup: h.cleanup, skip: SKIP_REDIS });
// the service runs every store behind its read cache (over Redis: keys only)
const hc = redisHarness(() => TEST_REDIS_URL);
mailSuite('redis + read cache', { open: async () => withReadCache(await hc.open()), cleanup: hc.cleanup, skip: SKIP_REDIS });
keySuite('redis + read cache', { open: async () => withReadCache(await hc.open()), cleanup: hc.cleanup, skip: SKIP_REDIS });
