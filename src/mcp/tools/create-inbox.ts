// create_inbox (spec: POST /mcp, create_inbox): a fresh, empty address; same service as POST /inboxes.
import { z } from 'zod';
import { webUrl } from '../../services/emails.ts';
import { createInbox } from '../../services/inboxes.ts';
import { defineTool } from './tool.ts';

export const createInboxTool = defineTool({
  name: 'create_inbox',
  title: 'Create a disposable inbox',
  description:
    'Creates a disposable, receive-only email address that is empty right now. Any mail sent to it is kept for about one hour, then deleted. ' +
    'Anyone who knows the address can read its mail, so never use it for anything private. ' +
    'Then give the address to the site or person that will send mail, and call check_inbox with wait_seconds to wait for it.',
  input: z.object({
    domain: z.string().max(253).optional().describe('One of available_domains; default: the first'),
    name: z.string().max(64).optional().describe('Part before the @ (letters, digits, . _ + -). Omit it for a random 8-character name (recommended: a chosen name may already hold mail)'),
  }),
  output: z.object({
    address: z.string().describe('The new inbox address'),
    web_url: z.string().describe('A page showing the inbox in a browser'),
    mail_ttl_seconds: z.number().int().min(1).describe('How long each email is kept after it arrives'),
    available_domains: z.array(z.string()).describe('Domains an inbox can be created at'),
  }),
  annotations: { title: 'Create a disposable inbox', readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run({ core }, args) {
    const inbox = await createInbox(core, { domain: args.domain, localPart: args.name, randomLength: 8 });
    const structured = {
      address: inbox.address,
      web_url: webUrl(core, inbox.address),
      mail_ttl_seconds: core.config.emailTtlSeconds,
      available_domains: [...core.domains.active()],
    };
    const text = [
      `Created inbox ${structured.address}. It is empty now; each email sent to it is kept for ${structured.mail_ttl_seconds} seconds.`,
      `Web page: ${structured.web_url}`,
      `Next: call check_inbox with address "${structured.address}" and wait_seconds (up to 20) to wait for mail.`,
      `Available domains: ${structured.available_domains.join(', ')}`,
    ].join('\n');
    return { structured, text };
  },
});
