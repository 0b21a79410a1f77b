// The provider API emulations, one prefix each under /providers (docs/providers.md): an app keeps
// its provider's official SDK, points its base URL at ephemail, and the mail lands in the inbox as
// if it had come over SMTP (services/provider-mail.ts). Outside /api/v1's contract: the routes are
// described by their own document, GET /providers/openapi.json.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../services/core.ts';
import { createProviderMailer } from '../../services/provider-mail.ts';
import { registerMailgun } from './mailgun.ts';
import { registerProviderDocument } from './openapi.ts';
import { registerPostmark } from './postmark.ts';
import { registerResend } from './resend.ts';
import { registerSendgrid } from './sendgrid.ts';
import { registerSesV1, registerSesV2 } from './ses.ts';
import { PROVIDER_PREFIXES } from './prefixes.ts';
import { createInflightBudget } from './shared.ts';

export { PROVIDER_PREFIXES } from './prefixes.ts';

export async function registerProviders(app: FastifyInstance, core: Core): Promise<void> {
  const mailer = createProviderMailer(core);
  // one budget of request bytes in flight for every emulation (shared.ts)
  const budget = createInflightBudget(core);
  registerProviderDocument(app, core);
  await app.register(async (scope) => registerSendgrid(scope, core, mailer, budget), { prefix: PROVIDER_PREFIXES.sendgrid });
  await app.register(async (scope) => registerResend(scope, core, mailer, budget), { prefix: PROVIDER_PREFIXES.resend });
  await app.register(async (scope) => registerPostmark(scope, core, mailer, budget), { prefix: PROVIDER_PREFIXES.postmark });
  await app.register(async (scope) => registerMailgun(scope, core, mailer, budget), { prefix: PROVIDER_PREFIXES.mailgun });
  await app.register(async (scope) => registerSesV2(scope, core, mailer, budget), { prefix: `${PROVIDER_PREFIXES.ses}/v2` });
  await app.register(async (scope) => registerSesV1(scope, core, mailer, budget), { prefix: PROVIDER_PREFIXES.ses });
}
