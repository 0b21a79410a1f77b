// What every provider emulation shares (docs/providers.md): its own body parsers and body limit (the
// message size limit plus encoding, not /api/v1's 64 KiB), each call counted in the caller's
// anonymous per-IP bucket, and every error (a malformed body, an unknown path, a refusal of the
// mail service) answered in that provider's own shape.
import { randomBytes, randomUUID } from 'node:crypto';
import { Busboy } from '@fastify/busboy';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../domain/errors.ts';
import { ipBucket } from '../../domain/limits.ts';
import { hitClient } from '../../limiter/limiter.ts';
import type { Core } from '../../services/core.ts';
import { ProviderRefusal } from '../../services/provider-mail.ts';
import { setLimitHeaders } from '../plugins/caller.ts';

/** A provider's face: how it says a refusal. */
export interface ProviderFace {
  /** Writes `refusal` as the provider would (status, headers, body). */
  refuse(reply: FastifyReply, refusal: ProviderRefusal, request: FastifyRequest): FastifyReply;
}

/** A multipart form (Mailgun): fields by name (repeatable) and the files in order. */
export interface MultipartForm {
  fields: Map<string, string[]>;
  files: { field: string; filename: string; contentType: string; content: Buffer }[];
}

/** The largest body a provider route reads: the message size limit, base64's third more, and room for the rest. */
export function providerBodyLimit(core: Core): number {
  return Math.ceil(core.config.maxMessageBytes * 1.4) + 1024 * 1024;
}

export const newId = {
  uuid: () => randomUUID(),
  /** SendGrid's X-Message-Id: 22 characters of base64url. */
  sendgrid: () => randomBytes(16).toString('base64url').slice(0, 22),
  /** SES: 0100 + 12 hex of time, a UUID, 000000 (as SES writes them). */
  ses: (now: number) => `0100${now.toString(16).padStart(12, '0')}-${randomUUID()}-000000`,
  hex: (n: number) => randomBytes(n).toString('hex'),
};

const bad = (message: string, field: string | null = null) => new ProviderRefusal('invalid', message, { field });

/** A Fastify error (or ours) as a refusal: body too large, unreadable, of a type not taken, or our own. */
export function refusalOf(err: unknown, core: Core): ProviderRefusal {
  if (err instanceof ProviderRefusal) return err;
  // an error of the hooks every request passes (a URL too long, a proxy header): said in the provider's shape
  if (err instanceof AppError) {
    if (err.status === 404) return new ProviderRefusal('not_found', err.message);
    if (err.status === 429) return new ProviderRefusal('rate_limited', err.message, { retryAfter: err.retryAfter });
    if (err.status === 413) return new ProviderRefusal('too_large', err.message);
    if (err.status < 500) return bad(err.message);
  }
  const e = err as { code?: string; statusCode?: number; message?: string };
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e.statusCode === 413) {
    return new ProviderRefusal('too_large', `The request body is over this service's limit of ${providerBodyLimit(core)} bytes (the message size limit, EPHEMAIL_MAX_MESSAGE_BYTES = ${core.config.maxMessageBytes}, plus encoding)`);
  }
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return bad(`Unsupported Content-Type: ${e.message ?? ''}`.trim());
  if (e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return bad('The request body is empty');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) return bad(e.message ?? 'Bad request');
  return new ProviderRefusal('unavailable', 'Internal error; try again later');
}

/**
 * The request bodies provider calls hold at once: all of them together at most
 * EPHEMAIL_MAX_INFLIGHT_BYTES (counted apart from SMTP's DATA, as SMTP's budget is that receiver's
 * own), one client (an IPv4 address, an IPv6 /64) at most a quarter of it, as SMTP does; a body is
 * counted by its Content-Length (a chunked one as the route's whole limit) until its answer is sent
 * or its connection closes. Made once per app (http/providers/index.ts).
 */
export interface InflightBudget {
  /** Takes `bytes` for `client`; a release function, or null when over the budget. */
  take(client: string, bytes: number): (() => void) | null;
}

export function createInflightBudget(core: Core): InflightBudget {
  const max = core.config.maxInflightBytes;
  const share = Math.floor(max / 4);
  let total = 0;
  const byClient = new Map<string, number>();
  return {
    take(client, bytes) {
      const bucket = ipBucket(client);
      const mine = byClient.get(bucket) ?? 0;
      if (total + bytes > max || mine + bytes > share) return null;
      total += bytes;
      byClient.set(bucket, mine + bytes);
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        total -= bytes;
        const left = (byClient.get(bucket) ?? 0) - bytes;
        if (left > 0) byClient.set(bucket, left);
        else byClient.delete(bucket);
      };
    },
  };
}

/**
 * Sets up a provider's encapsulated context: parsers (JSON always; `form` and `multipart` when the
 * provider takes them), the per-IP count, the error and not-found answers.
 */
export function providerContext(app: FastifyInstance, core: Core, budget: InflightBudget, face: ProviderFace, accepts: { form?: boolean; multipart?: boolean } = {}): void {
  const limit = providerBodyLimit(core);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i, { parseAs: 'string', bodyLimit: limit }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(bad('The request body is empty'), undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(bad('The request body is not valid JSON'), undefined);
    }
  });
  if (accepts.form) {
    app.addContentTypeParser(/^application\/x-www-form-urlencoded\s*(?:;|$)/i, { parseAs: 'string', bodyLimit: limit }, (_req, body, done) => {
      done(null, new URLSearchParams(String(body)));
    });
  }
  if (accepts.multipart) {
    app.addContentTypeParser(/^multipart\/form-data\s*(?:;|$)/i, { bodyLimit: limit }, (request, payload, done) => {
      let settled = false;
      const finish = (err: Error | null, form?: MultipartForm) => {
        if (settled) return;
        settled = true;
        done(err, form);
      };
      let busboy: ReturnType<typeof Busboy>;
      try {
        busboy = new Busboy({ headers: request.headers as never, limits: { fieldSize: limit, fileSize: limit, fields: 1000, files: 200, parts: 1200 } });
      } catch (err) {
        return finish(bad(`The multipart body cannot be read: ${(err as Error).message}`));
      }
      const form: MultipartForm = { fields: new Map(), files: [] };
      let bytes = 0;
      const pending: Promise<void>[] = [];
      busboy.on('field', (name, value, _nameCut, valueCut) => {
        if (valueCut) return finish(new ProviderRefusal('too_large', `The form field ${name} is too large`));
        bytes += value.length;
        const list = form.fields.get(name);
        if (list) list.push(value);
        else form.fields.set(name, [value]);
      });
      busboy.on('file', (field, stream, filename, _encoding, mimeType) => {
        const chunks: Buffer[] = [];
        pending.push(new Promise((resolve) => {
          stream.on('data', (c: Buffer) => {
            bytes += c.length;
            if (bytes > limit) return void finish(refusalOf({ code: 'FST_ERR_CTP_BODY_TOO_LARGE' }, core));
            chunks.push(c);
          });
          stream.on('end', () => {
            form.files.push({ field, filename: filename ?? '', contentType: mimeType || 'application/octet-stream', content: Buffer.concat(chunks) });
            resolve();
          });
        }));
      });
      busboy.on('error', (err) => finish(bad(`The multipart body cannot be read: ${(err as Error).message ?? err}`)));
      busboy.on('finish', () => void Promise.all(pending).then(() => finish(null, form)));
      payload.on('error', (err: Error & { code?: string }) => finish(err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? refusalOf(err, core) : bad('The request body was not received whole')));
      payload.pipe(busboy);
    });
  }
  // each call counts as a request in the caller's anonymous bucket (its IP, IPv6 /64, /56, /48)
  app.addHook('onRequest', (request, reply, done) => {
    hitClient(core.limiter, request.ip, core.config.anon, core.clock.now(), true).then((r) => {
      setLimitHeaders(reply, r);
      if (r.allowed) {
        const declared = Number(request.headers['content-length']);
        const bytes = request.headers['content-length'] !== undefined && Number.isFinite(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
        if (bytes === 0 || request.method === 'GET' || request.method === 'HEAD') return done();
        const release = budget.take(request.ip, bytes);
        if (!release) {
          core.log.info({ client: request.ip, bytes }, 'provider API call refused: too many request bytes in flight');
          return done(new ProviderRefusal('unavailable', 'Too much mail in flight from your address or in all, try again shortly', { retryAfter: 1 }));
        }
        reply.raw.once('close', release);
        return done();
      }
      const retry = r.retryAfterSeconds;
      const msg = r.reason === 'quota_exceeded'
        ? `Daily quota of ${core.config.anon.perDay} requests from your address used up; it resets at 00:00 UTC`
        : `More than ${core.config.anon.perMinute} requests this minute from your address; retry in ${retry} s`;
      done(new ProviderRefusal('rate_limited', msg, { retryAfter: retry }));
    }, () => done(new ProviderRefusal('unavailable', 'The limiter could not be reached; try again later')));
  });
  app.setErrorHandler((err, request, reply) => {
    const refusal = refusalOf(err, core);
    if (refusal.kind === 'unavailable' && !(err instanceof ProviderRefusal)) request.log.error({ err }, 'provider API request failed');
    if (refusal.retryAfter !== null) reply.header('retry-after', String(refusal.retryAfter));
    return face.refuse(reply, refusal, request);
  });
  app.setNotFoundHandler((request, reply) => face.refuse(reply, new ProviderRefusal('not_found', `No endpoint ${request.method} ${request.url.split('?', 1)[0].slice(0, 200)} in this emulation (docs/providers.md)`), request));
}

/** The HTTP status most providers give each refusal. */
export function statusOf(refusal: ProviderRefusal, invalid = 400): number {
  switch (refusal.kind) {
    case 'invalid':
    case 'recipient':
      return invalid;
    case 'too_large':
      return 413;
    case 'rate_limited':
      return 429;
    case 'not_found':
      return 404;
    default:
      return 503;
  }
}

/** A JSON body's field as a string, or a refusal naming it. */
export function str(value: unknown, field: string, required = false): string | undefined {
  if (value === undefined || value === null) {
    if (required) throw bad(`${field} is required`, field);
    return undefined;
  }
  if (typeof value !== 'string') throw bad(`${field} must be a string`, field);
  if (required && value.trim() === '') throw bad(`${field} is required`, field);
  return value;
}

/** Base64 content as bytes, or a refusal naming the field. */
export function base64(value: unknown, field: string): Buffer {
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(value)) throw bad(`${field} must be base64`, field);
  return Buffer.from(value, 'base64');
}

export function plainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
