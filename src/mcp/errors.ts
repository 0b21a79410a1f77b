// The one translator of AppError to the tool endpoint (docs/house-style.md rule 6): an actionable error
// is a normal tool result with isError: true whose text says what happened and what to do next.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AppError, StoreUnavailableError, describeError, type ErrorWording } from '../domain/errors.ts';

/** The tool endpoint's words for a service error: its argument names and tools. */
const MCP_WORDING: ErrorWording = {
  fields: { address: 'address', domain: 'domain', localPart: 'name', from: 'from', subject: 'subject', text: 'text', since: 'since_id', before: 'before' },
  hint: (h) => (h.kind === 'list_attachments' ? '; read_email lists them' : ''),
};

const NEXT_STEP: Partial<Record<AppError['type'], string>> = {
  not_found: 'Emails are deleted about one hour after arrival. Call check_inbox to list the ids that exist now.',
  invalid_request: 'Fix the argument named above and call the tool again.',
  address_in_use: 'Omit name to get a random empty address.',
  rate_limited: 'Wait that long before the next call. Calls are counted per Mcp-Session-Id (or per IP without one).',
  quota_exceeded: 'The daily quota resets at 00:00 UTC.',
  too_many_waiters: 'Wait for a held check_inbox call to return first.',
  internal_error: 'This is a fault in the service; retry shortly.',
};

export function toolError(err: unknown): CallToolResult {
  const e = err instanceof AppError
    ? err
    : err instanceof StoreUnavailableError
      ? new AppError('internal_error', 'The store is unreachable', { retryAfter: 5 })
      : new AppError('internal_error', 'Internal error', { retryAfter: 1 });
  const retry = e.retryAfter !== undefined ? ` Retry after ${Math.max(1, Math.ceil(e.retryAfter))} s.` : '';
  const next = NEXT_STEP[e.type] ? ` ${NEXT_STEP[e.type]}` : '';
  return {
    isError: true,
    content: [{ type: 'text', text: `Error (${e.type}): ${describeError(e, MCP_WORDING)}.${retry}${next}`.replace(/\.\./g, '.') }],
  };
}
