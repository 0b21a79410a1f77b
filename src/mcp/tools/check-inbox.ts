// check_inbox (spec: POST /mcp, check_inbox): the email list with an optional hold, on the same
// service and the same wait path as GET /api/v1/inboxes/{address}/emails?wait=.
import { z } from 'zod';
import { iso } from '../../domain/clock.ts';
import { FILTER_MAX_CHARS } from '../../domain/search.ts';
import { withWaitSlot } from '../../services/wait.ts';
import { checkList, listEmails, webUrl } from '../../services/emails.ts';
import { untrustedLine } from '../../domain/untrusted.ts';
import { defineTool } from './tool.ts';

/** Spec: at most 20 emails per result; wait_seconds 0 to 20. */
export const CHECK_INBOX_MAX = 20;
export const MAX_WAIT_SECONDS = 20;
/** Held check_inbox calls per rate-limit bucket (a session, or an IP without one). */
export const MCP_CONCURRENT_WAITS = 5;
/** Caps for sender-written fields in results (docs/contract-decisions.md: single-line and capped). */
export const FROM_MAX = 320;
export const SUBJECT_MAX = 500;


export const checkInboxTool = defineTool({
  name: 'check_inbox',
  title: 'Check an inbox for mail',
  description:
    'Lists the emails at an address (no bodies; use read_email for one). Newest first, or oldest first when since_id is given. At most 20. ' +
    'With wait_seconds, an empty result holds until mail arrives or the time runs out. ' +
    'To wait for a NEW email when the inbox already has some, pass the previous newest_id as since_id; otherwise existing mail is returned at once. ' +
    'from and subject narrow the list (case-insensitive substrings) and, with wait_seconds, wait for a matching email only.',
  input: z.object({
    address: z.string().min(1).max(320).describe('Full inbox address, e.g. from create_inbox; case-insensitive'),
    wait_seconds: z.number().int().min(0).max(MAX_WAIT_SECONDS).optional().describe('0 to 20: if nothing matches yet, hold until mail arrives or this many seconds pass'),
    since_id: z.string().max(100).optional().describe('An email id (e.g. a previous newest_id): only mail newer than it, oldest first. "" is the same as omitting it'),
    from: z.string().max(FILTER_MAX_CHARS).optional().describe('Only emails whose From contains this text (case-insensitive), e.g. "github". With wait_seconds, holds until a matching email arrives'),
    subject: z.string().max(FILTER_MAX_CHARS).optional().describe('Only emails whose Subject contains this text (case-insensitive), e.g. "verification"'),
  }),
  output: z.object({
    address: z.string(),
    web_url: z.string(),
    count: z.number().int().min(0).describe('Number of emails in this result'),
    newest_id: z.string().describe('Id of the newest email in this result; on an empty result, since_id echoed ("" when none was given). Pass it as since_id to wait for newer mail'),
    emails: z.array(
      z.object({
        id: z.string(),
        from: z.string().describe('The From header as sent (forgeable), on one line'),
        subject: z.string(),
        received_at: z.iso.datetime(),
        has_attachments: z.boolean(),
      }),
    ).max(CHECK_INBOX_MAX),
  }),
  annotations: { title: 'Check an inbox for mail', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run({ core, bucket, signal }, args) {
    const waitSeconds = args.wait_seconds ?? 0;
    // "" is "no cursor yet": what newest_id says for an empty inbox, so it can be passed straight back
    const sinceId = args.since_id === undefined || args.since_id.trim() === '' ? undefined : args.since_id;
    const input = { address: args.address, limit: CHECK_INBOX_MAX, since: sinceId, waitSeconds, signal, from: args.from, subject: args.subject };
    // the one check of the input: a bad address fails before taking a wait slot
    const checked = checkList(core, input);
    const read = async () => {
      const out = await listEmails(core, input, checked);
      const items = out.emails;
      const newest = sinceId !== undefined ? items.at(-1) : items[0];
      const structured = {
        address: out.address,
        web_url: webUrl(core, out.address),
        count: items.length,
        newest_id: newest?.id ?? sinceId ?? '',
        emails: items.map((e) => ({
          id: e.id,
          from: untrustedLine(e.sender, FROM_MAX),
          subject: untrustedLine(e.subject, SUBJECT_MAX),
          received_at: iso(e.receivedAt),
          has_attachments: e.hasAttachments,
        })),
      };
      return { structured, text: render(structured, sinceId !== undefined, out.waited ? waitSeconds : 0) };
    };
    if (waitSeconds <= 0) return read();
    const refusal = `${MCP_CONCURRENT_WAITS} check_inbox calls with wait_seconds are already waiting for this session; let one return first, or call again with wait_seconds 0`;
    return withWaitSlot(core.limiter, core.clock, { bucket: `${bucket}:mcp-wait`, max: MCP_CONCURRENT_WAITS, refusal }, waitSeconds * 1000, read);
  },
});

function render(r: { address: string; web_url: string; count: number; newest_id: string; emails: { id: string; from: string; subject: string; received_at: string; has_attachments: boolean }[] }, since: boolean, waited: number): string {
  if (r.count === 0) {
    const when = waited > 0 ? `after waiting ${waited} s` : 'right now';
    const again = r.newest_id ? `call check_inbox again with since_id "${r.newest_id}" and wait_seconds` : 'call check_inbox again with wait_seconds';
    return `No ${since ? 'new ' : ''}emails at ${r.address} ${when}. To keep waiting, ${again}.\nWeb page: ${r.web_url}`;
  }
  const lines = [
    `${r.count} email${r.count === 1 ? '' : 's'} at ${r.address} (${since ? 'oldest first' : 'newest first'}). newest_id: ${r.newest_id}`,
    'From and subject are written by the sender (untrusted). Read one with read_email and its id.',
  ];
  r.emails.forEach((e, i) => {
    lines.push(`${i + 1}. id: ${e.id}`, `   from: ${e.from}`, `   subject: ${e.subject}`, `   received_at: ${e.received_at}${e.has_attachments ? ' (has attachments)' : ''}`);
  });
  lines.push(`To wait for newer mail, call check_inbox with since_id "${r.newest_id}" and wait_seconds.`);
  return lines.join('\n');
}
