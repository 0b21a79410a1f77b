// What the /api/v1 route files share: the error responses of a route, the `{data}` wrapper, the
// security options, the path parameters, and the raw-bytes download.
import { Type, type TSchema } from '@sinclair/typebox';
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ERROR_STATUS, type ErrorType } from '../../domain/errors.ts';

export const ErrorRef = Type.Ref('Error');
/**
 * The error responses of a route: each type's status → the envelope. invalid_request and
 * internal_error always: any request can be refused as malformed before its route looks at it (a URL
 * over 8 KiB, a path that is not valid percent-encoding, a path segment over 1000 characters, a body
 * on a DELETE that is too large or not JSON, a Sec-Fetch-Dest the API does not answer), and any can fail.
 */
export const errors = (...types: ErrorType[]) => {
  const out: Record<number, TSchema> = {};
  for (const t of ['invalid_request' as const, ...types, 'internal_error' as const]) out[ERROR_STATUS[t]] = ErrorRef;
  return out;
};
export const data = <T extends TSchema>(t: T, description: string) => Type.Object({ data: t }, { description });
export const NoContent = Type.Null({ description: 'Deleted; no body' });

export const AddressParams = Type.Object({ address: Type.String({ description: 'Full inbox address, URL-encoded, case-insensitive' }) });
export const IdParams = Type.Object({ id: Type.String({ description: 'Email id (UUIDv7)' }) });

/** Anonymous, or a key as a bearer token or X-API-Key. */
export const SECURITY: { [label: string]: string[] }[] = [{}, { bearer: [] }, { apiKey: [] }];

const readableFrom = (chunks: AsyncIterable<Uint8Array>) => Readable.from(chunks, { objectMode: false });

/** Stored bytes, always as a download that never renders: attachment disposition, nosniff, CSP sandbox. */
export function download(reply: FastifyReply, type: string, size: number, disposition: string, chunks: AsyncIterable<Uint8Array>) {
  return reply
    .header('content-type', type)
    .header('content-length', String(size))
    .header('content-disposition', disposition)
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', 'sandbox')
    .header('cache-control', 'private, max-age=3600')
    .send(readableFrom(chunks));
}
