// /api/v1/inboxes/{address}/faults: SMTP faults on demand for one address (docs/faults.md). Every
// route needs a key; a key sees and removes its own rules (and how many other keys' there are), and
// every live key's rules apply to SMTP; the operator sees and removes any (routes/admin.ts).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../domain/errors.ts';
import type { Core } from '../../services/core.ts';
import * as faults from '../../services/faults.ts';
import { AddressParams, NoContent, errors } from './shared.ts';

export const FaultSchema = Type.Object(
  {
    id: Type.String({ description: 'flt_…' }),
    address: Type.String({ description: 'The inbox address (lowercase)' }),
    stage: Type.Union([Type.Literal('rcpt'), Type.Literal('data')], { description: 'rcpt: the reply to RCPT TO of this address; data: the final reply to DATA of a transaction that has this address among its recipients (the whole transaction gets it)' }),
    reply: Type.Optional(Type.String({ description: 'The reply sent, as given (code, enhanced code, text)' })),
    delay_seconds: Type.Optional(Type.Integer({ description: 'The final reply to DATA comes this much later (then the mail is handled as usual)' })),
    disconnect: Type.Optional(Type.Boolean({ description: 'The connection is dropped instead of the final reply to DATA' })),
    times: Type.Union([Type.Integer(), Type.Null()], { description: 'Transactions the rule applies to; null: until deleted or expired' }),
    remaining: Type.Union([Type.Integer(), Type.Null()], { description: 'Uses left; null when unlimited. A rule at 0 no longer applies.' }),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time', description: 'The rule is gone after this (the inbox TTL after its creation)' }),
  },
  { $id: 'Fault', title: 'Fault' },
);

const FaultBody = Type.Object(
  {
    stage: Type.Union([Type.Literal('rcpt'), Type.Literal('data')], { description: 'rcpt or data' }),
    reply: Type.Optional(Type.String({ minLength: 1, maxLength: faults.FAULT_REPLY_MAX_CHARS, description: 'A 4xx or 5xx reply with its enhanced status code, sent as given: "451 4.7.1 Try again later". One line of printable ASCII, at most 200 characters.' })),
    delay_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: faults.FAULT_DELAY_MAX_SECONDS, description: 'stage data only: answer the end of DATA this many seconds later (1 to 120); the mail is then stored as usual unless the client has gone' })),
    disconnect: Type.Optional(Type.Literal(true, { description: 'stage data only: drop the connection instead of the final reply; nothing is stored' })),
    times: Type.Optional(Type.Integer({ minimum: 1, maximum: faults.FAULT_TIMES_MAX, description: 'How many transactions the rule applies to; omitted: until deleted or expired' })),
  },
  { additionalProperties: false, description: 'Exactly one of reply, delay_seconds, disconnect' },
);
const FaultParams = Type.Object({ address: AddressParams.properties.address, id: Type.String({ maxLength: 100, description: 'Fault rule id (flt_…)' }) });
const FAULT_SECURITY: { [label: string]: string[] }[] = [{ bearer: [] }, { apiKey: [] }];

function keyOf(request: FastifyRequest): string {
  const c = request.caller;
  if (c.kind !== 'key' || !c.key) throw new AppError('key_required', 'SMTP fault rules belong to an API key: create one with POST /api/v1/keys and send it as Authorization: Bearer <key> or X-API-Key');
  return c.key.hash;
}

export const faultRoutes: FastifyPluginAsyncTypebox<{ core: Core }> = async (app, { core }) => {
  app.addSchema(FaultSchema);
  const FaultRef = Type.Ref(FaultSchema);

  app.post('/api/v1/inboxes/:address/faults', {
    schema: {
      operationId: 'addFault', tags: ['faults'], security: FAULT_SECURITY, params: AddressParams, body: FaultBody,
      summary: 'Make this address\'s SMTP answer with a fault: a 4xx/5xx reply at RCPT TO or at the end of DATA, a late final reply to DATA, or a dropped connection. Rules of an address apply in creation order; one with times is used up by that many transactions; a refused transaction stores nothing. Expires with the inbox TTL. At most 20 per address for each key (other keys\' rules leave this key\'s share alone) and 1,000 per key. Stops applying when the key is revoked. Additive.',
      response: { 201: Type.Object({ data: FaultRef }, { description: 'The rule' }), ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'conflict', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    const b = request.body;
    const rule = await faults.addFault(core, keyOf(request), request.params.address, { stage: b.stage, reply: b.reply, delaySeconds: b.delay_seconds, disconnect: b.disconnect, times: b.times });
    reply.code(201);
    return { data: faults.toWireFault(rule) };
  });

  app.get('/api/v1/inboxes/:address/faults', {
    schema: {
      operationId: 'listFaults', tags: ['faults'], security: FAULT_SECURITY, params: AddressParams,
      summary: 'This key\'s fault rules on the address, in the order they apply (used-up ones too, with remaining 0), and how many other keys have. Additive.',
      response: { 200: Type.Object({ data: Type.Array(FaultRef), meta: Type.Object({ address: Type.String(), count: Type.Integer(), other_rules: Type.Integer({ description: 'Unexpired rules of other keys on this address; those of live keys apply too, in creation order with this key\'s. Only the operator sees or removes them (docs/faults.md)' }) }) }, { description: 'Rules' }), ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request) => {
    const { address, rules, others } = await faults.listFaults(core, keyOf(request), request.params.address);
    return { data: rules.map(faults.toWireFault), meta: { address, count: rules.length, other_rules: others } };
  });

  app.delete('/api/v1/inboxes/:address/faults', {
    schema: {
      operationId: 'clearFaults', tags: ['faults'], security: FAULT_SECURITY, params: AddressParams,
      summary: 'Remove this key\'s fault rules on the address. Additive.',
      response: { 200: Type.Object({ data: Type.Object({ address: Type.String(), deleted: Type.Integer({ description: 'Rules removed' }) }) }, { description: 'Cleared' }), ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request) => ({ data: await faults.clearFaults(core, keyOf(request), request.params.address) }));

  app.delete('/api/v1/inboxes/:address/faults/:id', {
    schema: {
      operationId: 'deleteFault', tags: ['faults'], security: FAULT_SECURITY, params: FaultParams,
      summary: 'Remove one fault rule of this key. Additive.',
      response: { 204: NoContent, ...errors('invalid_request', 'unauthorized', 'key_required', 'not_found', 'rate_limited', 'quota_exceeded') },
    },
  }, async (request, reply) => {
    await faults.deleteFault(core, keyOf(request), request.params.address, request.params.id);
    return reply.code(204).send(null);
  });
};
