// Generated from the ephemail OpenAPI document by packages/client/scripts/types.ts. Do not edit.
export interface paths {
    "/api/v1": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Service discovery: endpoint index, docs links and the email TTL. Outside the quota. */
        get: operations["discover"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Health check: the store answers a trivial query and the SMTP listener runs. Outside the quota. */
        get: operations["health"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create a free API key (3 per IP per 24 hours). The raw key is shown once. */
        post: operations["createKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/me": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Caller identity, limits and usage. Does not consume quota. */
        get: operations["me"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/domains": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Domains that accept mail; use this list instead of hard-coding a domain. */
        get: operations["listDomains"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Generate an inbox address that is empty now. Inboxes are implicit: any address at an active domain receives mail. */
        post: operations["createInbox"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/emails": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List emails (no bodies). Newest first; with since, oldest first. wait holds the request until mail arrives (needs a key). */
        get: operations["listEmails"];
        put?: never;
        post?: never;
        /** Delete every email in the inbox. Irreversible. */
        delete: operations["purgeInbox"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A Server-Sent Events stream of new mail: one `email` event per email (data: the summary; id: the email id), a `: heartbeat` comment every 15 s. Resumable: `Last-Event-ID` (or `since`) replays the mail after that id still stored, then goes live, with no gap and no duplicate. Needs a key; a stream holds one of the key's concurrent waits and ends after 10 minutes (EventSource reconnects by itself). Additive. */
        get: operations["streamEmails"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/previews": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Row previews for up to 50 emails of one inbox at once: a one-line preview, the best code, the attachments not kept. Ids that are not this inbox's, or gone, are left out. Additive. */
        get: operations["previewEmails"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/latest": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The newest email that matches (from, subject, since), in full with codes and links; with wait, held until one arrives. "Wait for the verification email and give me the code" in one request. Additive. */
        get: operations["latestEmail"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/emails/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One email with bodies and attachment metadata. 404 once expired. */
        get: operations["getEmail"];
        put?: never;
        post?: never;
        /** Delete one email ahead of its TTL. Irreversible. */
        delete: operations["deleteEmail"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/emails/{id}/attachments": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Attachment metadata of one email (the same list is inlined in the email). */
        get: operations["listAttachments"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/emails/{id}/attachments/{attachment_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Raw attachment bytes, always as a download (Content-Disposition: attachment, CSP sandbox, nosniff). */
        get: operations["downloadAttachment"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/emails/{id}/raw": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The message as received (an .eml file), always as a download (Content-Disposition: attachment, CSP sandbox, nosniff). Parts over 5 MB are cut out of the stored copy. */
        get: operations["getRawEmail"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The key's webhooks, oldest first (without secrets). Additive. */
        get: operations["listWebhooks"];
        put?: never;
        /** Register a webhook for one inbox, or for a whole domain (*@<domain>) where the operator allows it (EPHEMAIL_WEBHOOK_WILDCARD=true; otherwise 403 forbidden). Each new email is POSTed as an `email.received` event signed with Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature); failed deliveries are retried with backoff for the email's lifetime. The secret is shown once. At most 10 per key and 10 per address (all keys together; 409 too_many_webhooks). Additive. */
        post: operations["createWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Delete a webhook; its pending deliveries are dropped. Additive. */
        delete: operations["deleteWebhook"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/{id}/deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Recent delivery attempts of a webhook, newest first (the last 100, for two hours): status, response code and next retry; events dropped by a fan-out limit show as status dropped. Additive. */
        get: operations["listWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/faults": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This key's fault rules on the address, in the order they apply (used-up ones too, with remaining 0), and how many other keys have. Additive. */
        get: operations["listFaults"];
        put?: never;
        /** Make this address's SMTP answer with a fault: a 4xx/5xx reply at RCPT TO or at the end of DATA, a late final reply to DATA, or a dropped connection. Rules of an address apply in creation order; one with times is used up by that many transactions; a refused transaction stores nothing. Expires with the inbox TTL. At most 20 per address for each key (other keys' rules leave this key's share alone) and 1,000 per key. Stops applying when the key is revoked. Additive. */
        post: operations["addFault"];
        /** Remove this key's fault rules on the address. Additive. */
        delete: operations["clearFaults"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/inboxes/{address}/faults/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove one fault rule of this key. Additive. */
        delete: operations["deleteFault"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This machine-readable contract (OpenAPI 3.1). Outside the quota. */
        get: operations["openapi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** Limits */
        Limits: {
            requests_per_minute: number;
            requests_per_day: number;
            /** @description 0 for anonymous callers (wait needs a key) */
            concurrent_waits: number;
        };
        /** Inbox */
        Inbox: {
            /** @description Full address, <local_part>@<domain> */
            address: string;
            /** @description Part before the @, lowercase */
            local_part: string;
            domain: string;
            /** @description Lifetime of an email in seconds */
            email_ttl_seconds: number;
        };
        /** Domain */
        Domain: {
            /** @description A domain that currently accepts mail */
            domain: string;
        };
        /** EmailSummary */
        EmailSummary: {
            /** @description UUIDv7; ids sort in arrival order */
            id: string;
            /** @description Inbox address that received the mail */
            address: string;
            /** @description The From header as received (encoded words decoded); "" when absent. Forgeable: no SPF/DKIM check. */
            sender: string;
            /** @description Domain of the SMTP envelope sender (MAIL FROM), lowercased; null for the null sender <> */
            mailed_by: string | null;
            /** @description Subject, encoded words decoded; "" when absent */
            subject: string;
            has_attachments: boolean;
            /**
             * Format: date-time
             * @description Arrival time
             */
            received_at: string;
            /**
             * Format: date-time
             * @description When the email will be deleted
             */
            expires_at: string;
        };
        /** Attachment */
        Attachment: {
            /** @description Unique within its email */
            id: string;
            /** @description Safe file name (no path parts or control characters) */
            filename: string;
            content_type: string;
            size_bytes: number;
            /** @description Address of the raw-bytes endpoint for this attachment */
            download_url: string;
            /** @description The part's Content-ID without angle brackets (what `cid:` URLs in the HTML name); null when absent. Additive. */
            content_id: string | null;
        };
        /** Code */
        Code: {
            /**
             * @description Exactly what a user types: digit grouping removed ("559 120" → "559120"); alphanumeric codes as shown
             * @example 559120
             */
            value: string;
            /** @description A short snippet around the code */
            context: string;
        };
        /** Link */
        Link: {
            /** @description The href as written (entities decoded) */
            url: string;
            /** @description The link text (or image alt text), on one line */
            text: string;
            /** @description What the link is for */
            kind: "verify" | "reset_password" | "login" | "unsubscribe" | "view_online" | "other";
            /** @description The real target when a click-tracking redirect carries it in its own URL (AWS SES awstrack.me, ?url=, ?redirect=, ?u=); null otherwise */
            destination: string | null;
        };
        /**
         * HtmlCheck
         * @description HTML compatibility from the caniemail.com data (docs/sender-checks.md)
         */
        HtmlCheck: {
            /** @description Share of the (feature found × client checked) pairs that are supported, in percent, as Mailpit totals it (over the features listed) */
            supported_percent: number;
            /** @description Share of those pairs only partly supported */
            partial_percent: number;
            /** @description Share of those pairs not supported */
            unsupported_percent: number;
            /** @description Features the HTML uses that at least one checked client does not fully support, most clients affected first (at most 100) */
            features: {
                /**
                 * @description caniemail.com title, e.g. `<style> element`, `display:flex`
                 * @example display:flex
                 */
                feature: string;
                /** @description Its caniemail.com page */
                url: string | null;
                /** @description The checked clients that do not, or only partly, support it */
                clients: {
                    /**
                     * @description caniemail id, `family.platform`
                     * @example outlook.windows
                     */
                    client: string;
                    /** @example Outlook Windows */
                    name: string;
                    support: "none" | "partial";
                    /** @description caniemail.com notes (at most 2, each at most 200 characters) */
                    notes: string[];
                }[];
            }[];
            /** @description Gmail, Outlook (desktop, web, mobile), Apple Mail and Yahoo platforms, as caniemail ids */
            clients_checked: string[];
            /** @description Not all of the HTML was checked: only its first 131,072 characters, or its CSS cut to a bounded size (16,384 characters and 400 rules of <style>, 32,768 characters of style attributes) */
            truncated: boolean;
            /** @description Why there is no result: `over_budget` (the check ran out of time), `html_over_budget` (the HTML itself was not derived), `failed`; null when checked */
            error: string | null;
        };
        /**
         * Spam
         * @description SpamAssassin's verdict from the configured spamd (EPHEMAIL_SPAMD), or why there is none
         */
        Spam: {
            /**
             * @description SpamAssassin's score
             * @example 2.3
             */
            score: number;
            /**
             * @description The score from which spamd calls it spam (its required_score)
             * @example 5
             */
            threshold: number;
            is_spam: boolean;
            /** @description The rules that hit, in spamd's order */
            rules: {
                /** @example MISSING_DATE */
                name: string;
                score: number;
                description: string;
            }[];
            /** @description Only the first 512 KiB of the message were sent to spamd */
            truncated: boolean;
        } | {
            /**
             * @description `spamd unreachable`, `spamd timed out`, or `spamd error: …`; kept with the email like a score (docs/sender-checks.md)
             * @example spamd unreachable
             */
            error: string;
        };
        /** Header */
        Header: {
            name: string;
            value: string;
        };
        /**
         * Authentication
         * @description SPF, DKIM, DMARC and ARC verdicts, computed once shortly after arrival (docs/authentication.md)
         */
        Authentication: {
            spf: {
                /** @description An RFC 8601 result word */
                result: "pass" | "fail" | "softfail" | "neutral" | "none" | "temperror" | "permerror" | "policy";
                /** @description The MAIL FROM domain (the HELO name for the null sender) */
                domain: string | null;
            };
            /** @description One entry per signature; [] when unsigned */
            dkim: {
                /** @description An RFC 8601 result word */
                result: "pass" | "fail" | "softfail" | "neutral" | "none" | "temperror" | "permerror" | "policy";
                /** @description The signing domain (d=) */
                domain: string;
                /** @description The selector (s=) */
                selector: string;
                /** @description Whether the signing domain aligns with the From domain (DMARC) */
                aligned: boolean;
                /** @description Why, when not pass (e.g. "body hash did not verify": the body changed after signing) */
                comment?: string;
            }[];
            dmarc: {
                /** @description An RFC 8601 result word */
                result: "pass" | "fail" | "softfail" | "neutral" | "none" | "temperror" | "permerror" | "policy";
                /** @description The From domain; null when the message has no single From domain */
                domain: string | null;
                /** @description The record's p= (none, quarantine, reject); null without a record */
                policy: string | null;
            };
            arc: {
                /** @description An RFC 8601 result word */
                result: "pass" | "fail" | "softfail" | "neutral" | "none" | "temperror" | "permerror" | "policy";
            };
            /** @description The value of an Authentication-Results header for this message (RFC 8601) */
            header: string;
        };
        /** Email */
        Email: {
            /** @description UUIDv7; ids sort in arrival order */
            id: string;
            /** @description Inbox address that received the mail */
            address: string;
            /** @description The From header as received (encoded words decoded); "" when absent. Forgeable: no SPF/DKIM check. */
            sender: string;
            /** @description Domain of the SMTP envelope sender (MAIL FROM), lowercased; null for the null sender <> */
            mailed_by: string | null;
            /** @description Subject, encoded words decoded; "" when absent */
            subject: string;
            has_attachments: boolean;
            /**
             * Format: date-time
             * @description Arrival time
             */
            received_at: string;
            /**
             * Format: date-time
             * @description When the email will be deleted
             */
            expires_at: string;
            /** @description To header, decoded ("" when absent) */
            to: string;
            /** @description Cc header, decoded ("" when absent) */
            cc: string;
            /** @description Message-ID header */
            message_id: string | null;
            /** @description Every header in the order received */
            headers: components["schemas"]["Header"][];
            /** @description Null when the message had no plain-text part */
            text_body: string | null;
            /** @description Null when the message had no HTML part. Sanitized with an allow-list: no script, iframe, object, embed, form, svg, on* attributes or javascript: URLs. */
            html_body: string | null;
            attachments: components["schemas"]["Attachment"][];
            /** @description Attachments not kept: over 5 MB decoded, or past the 100th. Additive. */
            attachments_dropped: number;
            /** @description Address of the message as received (`GET /api/v1/emails/{id}/raw`, an .eml download). Additive. */
            raw_url: string;
            /** @description Verification codes found in the subject, text and HTML, best first; [] when none (docs/extraction.md). Additive. */
            codes: components["schemas"]["Code"][];
            /** @description Links, the main action first and unsubscribe last; List-Unsubscribe included; nothing is fetched (docs/extraction.md). Additive. */
            links: components["schemas"]["Link"][];
            /** @description Spam score from SpamAssassin's spamd; null when EPHEMAIL_SPAMD is not set (or was not when the email was first read). Additive. */
            spam: components["schemas"]["Spam"] | null;
            /** @description HTML compatibility with major mail clients (caniemail.com data); null when the message has no HTML part. Additive. */
            html_check: components["schemas"]["HtmlCheck"] | null;
            /** @description The body's language as a BCP 47 primary subtag: ISO 639-1 when the language has one (`fr`, `en`), else ISO 639-3; null when the body is too short or the language undetermined (franc-min, 82 languages; docs/extraction.md). Additive. */
            language: string | null;
            /** @description SPF, DKIM, DMARC and ARC verdicts; null until computed (within seconds of arrival when DNS answers) and for mail not received over SMTP. Additive. */
            authentication: components["schemas"]["Authentication"] | null;
        };
        /** ApiKey */
        ApiKey: {
            /** @description The raw key (eph_ + 40 base62 characters). Returned exactly once; cannot be recovered. */
            api_key: string;
            /** @description First 12 characters of the key, used to identify it */
            key_prefix: string;
            label: string;
            /** @enum {string} */
            tier: "free";
            limits: components["schemas"]["Limits"];
            /**
             * Format: date-time
             * @description Creation time
             */
            created_at: string;
            warning: string;
        };
        /** Identity */
        Identity: {
            kind: "anonymous" | "key";
            tier: "anonymous" | "free";
            /** @description null for anonymous callers */
            key_prefix: string | null;
            /** @description null for anonymous callers */
            label: string | null;
            limits: components["schemas"]["Limits"];
            usage: {
                requests_this_minute: number;
                requests_today: number;
            };
        };
        /** Health */
        Health: {
            status: "ok" | "degraded";
            database: "connected" | "disconnected";
            smtp: "running" | "stopped";
        };
        /** ListMeta */
        ListMeta: {
            address: string;
            /** @description Number of items returned */
            count: number;
            /** @description Feed back as since on the next poll */
            next_since: string | null;
            /** @description Feed back as before to page into older mail */
            next_before: string | null;
            /** @description True when the request was held by wait */
            waited: boolean;
        };
        /** Error */
        Error: {
            error: {
                type: "invalid_request" | "unauthorized" | "key_required" | "forbidden" | "not_found" | "address_in_use" | "too_many_webhooks" | "conflict" | "rate_limited" | "quota_exceeded" | "too_many_waiters" | "internal_error";
                /** @description Human-readable; may be reworded at any time */
                message: string;
                /** @description Documentation address: {base_url}/docs#error-<type> */
                docs: string;
            };
        };
        /** Webhook */
        Webhook: {
            /** @description wh_… */
            id: string;
            /** @description Where events are POSTed */
            url: string;
            /** @description The inbox address, or *@<domain> for every inbox of the domain */
            address: string;
            /** Format: date-time */
            created_at: string;
            /** @description whsec_…: the Standard Webhooks signing secret. Returned only when the webhook is created. */
            secret?: string;
        };
        /** WebhookDelivery */
        WebhookDelivery: {
            /** @description The webhook-id header: the same on every attempt of one event */
            event_id: string;
            email_id: string;
            /** @description 1 for the first attempt; 0 for an event that was dropped (never sent) */
            attempt: number;
            /** Format: date-time */
            attempted_at: string;
            /** @description delivered (2xx), retrying (a later attempt is scheduled), gave_up (the email expired, the address is refused, or the webhook or its key is gone) or dropped (never queued: a fan-out limit; error says which) */
            status: "delivered" | "retrying" | "gave_up" | "dropped";
            /** @description The receiver's HTTP status; null when no response came */
            response_code: number | null;
            /** @description Why the attempt failed; null when delivered */
            error: string | null;
            next_retry_at: string | null;
        };
        /** Fault */
        Fault: {
            /** @description flt_… */
            id: string;
            /** @description The inbox address (lowercase) */
            address: string;
            /** @description rcpt: the reply to RCPT TO of this address; data: the final reply to DATA of a transaction that has this address among its recipients (the whole transaction gets it) */
            stage: "rcpt" | "data";
            /** @description The reply sent, as given (code, enhanced code, text) */
            reply?: string;
            /** @description The final reply to DATA comes this much later (then the mail is handled as usual) */
            delay_seconds?: number;
            /** @description The connection is dropped instead of the final reply to DATA */
            disconnect?: boolean;
            /** @description Transactions the rule applies to; null: until deleted or expired */
            times: number | null;
            /** @description Uses left; null when unlimited. A rule at 0 no longer applies. */
            remaining: number | null;
            /** Format: date-time */
            created_at: string;
            /**
             * Format: date-time
             * @description The rule is gone after this (the inbox TTL after its creation)
             */
            expires_at: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: {
        /** @description Requests allowed in the current minute window */
        "ratelimit-limit": number;
        /** @description Requests left in the current minute window */
        "ratelimit-remaining": number;
        /** @description Seconds until the minute window resets */
        "ratelimit-reset": number;
        /** @description On 429 (and some 500): seconds to wait before retrying */
        "retry-after": number;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    discover: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Service index */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            name: string;
                            version: string;
                            email_ttl_seconds: number;
                            domains: string[];
                            docs: {
                                html: string;
                                openapi: string;
                            };
                            mcp: string;
                            web: string;
                            /** @description Where mail clients read any inbox (IMAP, POP3). Additive. */
                            mail_access: {
                                /** @description IMAP4rev1: user the inbox address, password anything or an API key (docs/imap.md); null when off */
                                imap: {
                                    /** @description The service's public host name (of EPHEMAIL_PUBLIC_URL) */
                                    host: string;
                                    port: number;
                                    /** @description STARTTLS (IMAP) / STLS (POP3) offered; plaintext login is refused before it */
                                    starttls: boolean;
                                } | null;
                                /** @description POP3, the same login; null when off */
                                pop3: {
                                    /** @description The service's public host name (of EPHEMAIL_PUBLIC_URL) */
                                    host: string;
                                    port: number;
                                    /** @description STARTTLS (IMAP) / STLS (POP3) offered; plaintext login is refused before it */
                                    starttls: boolean;
                                } | null;
                            };
                            endpoints: {
                                method: string;
                                path: string;
                                summary: string;
                            }[];
                            /** @description Base URLs of the provider API emulations: point the provider's SDK here (docs/providers.md). Additive. */
                            providers: {
                                /** @description The emulations' own OpenAPI document (not part of this contract) */
                                openapi: string;
                                sendgrid: string;
                                ses: string;
                                postmark: string;
                                resend: string;
                                mailgun: string;
                            };
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    health: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Healthy */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Health"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Degraded: the failing part is named */
            503: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Health"];
                    };
                };
            };
        };
    };
    createKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description Free text to recognise the key by; "" when omitted */
                    label?: string;
                    /** @description Unverified; used only to warn of breaking changes */
                    contact_email?: string;
                };
            };
        };
        responses: {
            /** @description The new key */
            201: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ApiKey"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    me: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Identity */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Identity"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listDomains: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Active domains, the default first */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Domain"][];
                        meta: {
                            count: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createInbox: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description One of GET /api/v1/domains; default: the first */
                    domain?: string;
                    /** @description Lowercased; random 10 characters of [a-z0-9] when omitted */
                    local_part?: string;
                };
            };
        };
        responses: {
            /** @description The address */
            201: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Inbox"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            409: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listEmails: {
        parameters: {
            query?: {
                /** @description Page size */
                limit?: number;
                /** @description An email id: only newer emails, oldest first */
                since?: string;
                /** @description An email id: only older emails, newest first (pages backwards) */
                before?: string;
                /** @description Seconds to hold when the result would be empty. Needs an API key. */
                wait?: number;
                /** @description Only emails whose decoded From contains this text (case-insensitive). With wait, the request returns only when a matching email arrives. Additive. */
                from?: string;
                /** @description Only emails whose decoded Subject contains this text (case-insensitive). Additive. */
                subject?: string;
                /** @description Only emails whose body text (the plain part, or the HTML part as text; its first 32,768 characters) contains this, case-insensitive, any run of white space matching any other. Reads the search texts of at most the 200 nearest emails per request. Additive. */
                text?: string;
            };
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Emails; empty data when nothing matched (also when a wait ran out) */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["EmailSummary"][];
                        meta: components["schemas"]["ListMeta"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    purgeInbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Purged */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            address: string;
                            /** @description Number of emails removed */
                            deleted: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    streamEmails: {
        parameters: {
            query?: {
                /** @description An email id: replay the stored mail after it first (as Last-Event-ID does) */
                since?: string;
            };
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description text/event-stream */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    previewEmails: {
        parameters: {
            query: {
                /** @description Up to 50 email ids of this inbox, comma-separated (more are ignored) */
                ids: string;
            };
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Previews, in the order asked */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            id: string;
                            /** @description The first words of the text body (or of the HTML as text) on one line, at most 140 characters */
                            preview: string;
                            /** @description The best verification code found, or null */
                            code: string | null;
                            /** @description Attachments not kept (over 5 MB, or past the 100th) */
                            attachments_dropped: number;
                        }[];
                        meta: {
                            address: string;
                            count: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    latestEmail: {
        parameters: {
            query?: {
                /** @description An email id: only newer emails. Any UUIDv7 works, so one made from the current time means "only mail from now on". */
                since?: string;
                /** @description Seconds to hold until a matching email arrives. Needs an API key. */
                wait?: number;
                /** @description Only emails whose decoded From contains this text (case-insensitive) */
                from?: string;
                /** @description Only emails whose decoded Subject contains this text (case-insensitive) */
                subject?: string;
                /** @description Only emails whose body text contains this (case-insensitive, white space as one space); reads the search texts of at most the 200 nearest emails per request */
                text?: string;
                /** @description Only emails whose body is in this language (the `language` field, e.g. `fr`). Reads the views of at most the 20 nearest emails that match the other filters. Additive. */
                language?: string;
            };
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The newest matching email or null */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @description The newest matching email, or null when nothing matched (also when a wait ran out) */
                        data: components["schemas"]["Email"] | null;
                        meta: {
                            address: string;
                            /** @description Whether the request was held */
                            waited: boolean;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getEmail: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Email id (UUIDv7) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The email */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Email"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteEmail: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Email id (UUIDv7) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted; no body */
            204: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listAttachments: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Email id (UUIDv7) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Attachments */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Attachment"][];
                        meta: {
                            email_id: string;
                            count: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    downloadAttachment: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Email id */
                id: string;
                /** @description Attachment id */
                attachment_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The bytes, with the stored Content-Type (the attachment's own media type) */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "*/*": string;
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getRawEmail: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Email id (UUIDv7) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The message bytes */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "message/rfc822": string;
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listWebhooks: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Webhooks */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Webhook"][];
                        meta: {
                            count: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description http(s) URL of the receiver. Loopback, private, link-local and metadata addresses are refused (here and at each delivery, after DNS) unless the operator set EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true. */
                    url: string;
                    /** @description An inbox address, or *@<domain> for every inbox of an active domain (403 forbidden unless the operator set EPHEMAIL_WEBHOOK_WILDCARD=true) */
                    address: string;
                };
            };
        };
        responses: {
            /** @description The webhook, with its secret (shown only now) */
            201: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Webhook"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            403: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            409: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Webhook id (wh_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted; no body */
            204: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listWebhookDeliveries: {
        parameters: {
            query?: {
                /** @description How many attempts, newest first */
                limit?: number;
            };
            header?: never;
            path: {
                /** @description Webhook id (wh_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Attempts */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["WebhookDelivery"][];
                        meta: {
                            webhook_id: string;
                            count: number;
                            /** @description Events queued for this webhook now (waiting for a first attempt or a retry) */
                            pending: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listFaults: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Rules */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Fault"][];
                        meta: {
                            address: string;
                            count: number;
                            /** @description Unexpired rules of other keys on this address; those of live keys apply too, in creation order with this key's. Only the operator sees or removes them (docs/faults.md) */
                            other_rules: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    addFault: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        /** @description Exactly one of reply, delay_seconds, disconnect */
        requestBody: {
            content: {
                "application/json": {
                    /** @description rcpt or data */
                    stage: "rcpt" | "data";
                    /** @description A 4xx or 5xx reply with its enhanced status code, sent as given: "451 4.7.1 Try again later". One line of printable ASCII, at most 200 characters. */
                    reply?: string;
                    /** @description stage data only: answer the end of DATA this many seconds later (1 to 120); the mail is then stored as usual unless the client has gone */
                    delay_seconds?: number;
                    /**
                     * @description stage data only: drop the connection instead of the final reply; nothing is stored
                     * @enum {boolean}
                     */
                    disconnect?: true;
                    /** @description How many transactions the rule applies to; omitted: until deleted or expired */
                    times?: number;
                };
            };
        };
        responses: {
            /** @description The rule */
            201: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Fault"];
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            409: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    clearFaults: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Cleared */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: {
                            address: string;
                            /** @description Rules removed */
                            deleted: number;
                        };
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteFault: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Full inbox address, URL-encoded, case-insensitive */
                address: string;
                /** @description Fault rule id (flt_…) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted; no body */
            204: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            404: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            429: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    openapi: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI document */
            200: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Default Response */
            400: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            401: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Default Response */
            500: {
                headers: {
                    "ratelimit-limit": components["headers"]["ratelimit-limit"];
                    "ratelimit-remaining": components["headers"]["ratelimit-remaining"];
                    "ratelimit-reset": components["headers"]["ratelimit-reset"];
                    "retry-after": components["headers"]["retry-after"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
}
