// Each provider emulation's prefix on the HTTP port (docs/providers.md), as GET /api/v1 lists them.
export const PROVIDER_PREFIXES = {
  sendgrid: '/providers/sendgrid',
  resend: '/providers/resend',
  postmark: '/providers/postmark',
  mailgun: '/providers/mailgun',
  ses: '/providers/ses',
} as const;

/** The emulations' own OpenAPI document (outside /api/v1's contract). */
export const PROVIDER_OPENAPI_PATH = '/providers/openapi.json';
