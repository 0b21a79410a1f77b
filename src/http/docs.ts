// /docs: a human-readable API reference rendered from the OpenAPI document (one source of truth),
// with an anchor per endpoint and per error type (error.docs links to #error-<type>).
import type { FastifyInstance } from 'fastify';
import { ERROR_MEANING, ERROR_STATUS, ERROR_TYPES } from '../domain/errors.ts';
import { escapeHtml as esc } from '../domain/escape.ts';
import type { Core } from '../services/core.ts';

function schemaText(schema: any, components: Record<string, any>, depth = 0): string {
  if (!schema || depth > 4) return '';
  if (schema.$ref) {
    const name = String(schema.$ref).split('/').pop();
    return `<a href="#schema-${esc(name)}">${esc(name)}</a>`;
  }
  if (schema.anyOf || schema.oneOf) return (schema.anyOf ?? schema.oneOf).map((s: any) => schemaText(s, components, depth + 1)).join(' | ');
  if (schema.type === 'array') return `array of ${schemaText(schema.items, components, depth + 1)}`;
  if (schema.type === 'object' && schema.properties) {
    const rows = Object.entries(schema.properties as Record<string, any>)
      .map(([k, v]) => `<li><code>${esc(k)}</code>: ${schemaText(v, components, depth + 1)}${v.description ? ` — ${esc(v.description)}` : ''}</li>`)
      .join('');
    return `object<ul>${rows}</ul>`;
  }
  if (schema.const !== undefined) return `<code>${esc(JSON.stringify(schema.const))}</code>`;
  const bounds = ['minimum', 'maximum', 'maxLength', 'pattern', 'default', 'format'].filter((k) => schema[k] !== undefined).map((k) => `${k} ${esc(schema[k])}`);
  return `${esc(schema.type ?? 'any')}${bounds.length ? ` (${bounds.join(', ')})` : ''}`;
}

/** How a receiver checks a webhook call (also in docs/push.md). */
export const VERIFY_SNIPPET = `import { Webhook } from 'standardwebhooks'; // npm i standardwebhooks
import { createServer } from 'node:http';

const wh = new Webhook(process.env.EPHEMAIL_WEBHOOK_SECRET!); // the whsec_… secret from POST /api/v1/webhooks
createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    try {
      // checks webhook-signature over webhook-id.webhook-timestamp.body, and that the timestamp is within 5 minutes
      const event = wh.verify(body, req.headers as Record<string, string>) as { type: string; data: { id: string; subject: string; url: string } };
      console.log(event.type, event.data.subject, event.data.url); // de-duplicate on req.headers['webhook-id']
      res.writeHead(204).end();
    } catch {
      res.writeHead(400).end(); // not from this service
    }
  });
}).listen(3000);`;

export function renderDocs(doc: any, core: Core): string {
  const components = doc.components?.schemas ?? {};
  const ops: string[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {}) as [string, Record<string, any>][]) {
    for (const [method, op] of Object.entries(item)) {
      const id = `op-${op.operationId ?? `${method}-${path}`}`;
      const params = (op.parameters ?? []).map((p: any) => `<li><code>${esc(p.name)}</code> (${esc(p.in)}${p.required ? ', required' : ''}): ${schemaText(p.schema, components)}${p.description ? ` — ${esc(p.description)}` : p.schema?.description ? ` — ${esc(p.schema.description)}` : ''}</li>`).join('');
      const body = op.requestBody ? `<h4>Body (JSON)</h4>${schemaText(op.requestBody.content?.['application/json']?.schema, components)}` : '';
      const responses = Object.entries(op.responses ?? {}).map(([code, r]: [string, any]) => {
        const schema = r.content ? (Object.values(r.content)[0] as any)?.schema : undefined;
        return `<li><strong>${esc(code)}</strong> ${esc(r.description ?? '')}${schema ? `: ${schemaText(schema, components)}` : ''}</li>`;
      }).join('');
      ops.push(`<section id="${esc(id)}"><h3><code>${esc(method.toUpperCase())} ${esc(path)}</code></h3><p>${esc(op.summary ?? '')}</p>${params ? `<h4>Parameters</h4><ul>${params}</ul>` : ''}${body}<h4>Responses</h4><ul>${responses}</ul></section>`);
    }
  }
  const schemas = Object.entries(components).map(([name, s]) => `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3>${schemaText(s, components)}</section>`).join('');
  const errors = ERROR_TYPES.map((t) => `<tr id="error-${t}"><td><code>${t}</code></td><td>${ERROR_STATUS[t]}</td><td>${esc(ERROR_MEANING[t])}</td></tr>`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>ephemail API reference</title><style>
:root{color-scheme:light dark;font-family:system-ui,sans-serif;line-height:1.5}body{max-width:60rem;margin:0 auto;padding:1rem}
code{background:rgba(127,127,127,.15);padding:0 .2em;border-radius:3px}section{border-top:1px solid rgba(127,127,127,.3);padding:.5rem 0}
table{border-collapse:collapse}td,th{border:1px solid rgba(127,127,127,.4);padding:.3rem .5rem;text-align:left}:target{background:rgba(255,200,0,.15)}
</style></head><body>
<h1>ephemail API reference</h1>
<p>${esc(doc.info?.description ?? '')}</p>
<p>Base URL: <code>${esc(core.baseUrl())}/api/v1</code> · contract version ${esc(doc.info?.version)} · <a href="/api/v1/openapi.json">openapi.json</a> (OpenAPI ${esc(doc.openapi)}) · tool endpoint <code>POST /mcp</code></p>
<h2 id="authentication">Authentication and limits</h2>
<p>Anonymous callers share a bucket per IP (${core.config.anon.perMinute}/min, ${core.config.anon.perDay}/day). A free key (<code>POST /api/v1/keys</code>) sent as <code>Authorization: Bearer &lt;key&gt;</code> or <code>X-API-Key</code> gets ${core.config.key.perMinute}/min, ${core.config.key.perDay}/day and ${core.config.key.concurrentWaits} concurrent waits. Every response carries <code>ratelimit-limit</code>, <code>ratelimit-remaining</code> and <code>ratelimit-reset</code> (seconds until the minute window resets); every 429 carries <code>retry-after</code>. Emails live ${core.config.emailTtlSeconds} seconds.</p>
<h2 id="errors">Errors</h2><p>Every error is <code>{"error":{"type","message","docs"}}</code>. Branch on <code>type</code>; <code>message</code> may be reworded.</p>
<table><thead><tr><th>type</th><th>status</th><th>meaning</th></tr></thead><tbody>${errors}</tbody></table>
<h2 id="webhooks">Webhooks</h2>
<p><code>POST /api/v1/webhooks</code> with <code>{"url","address"}</code> (an inbox, or <code>*@&lt;domain&gt;</code>) makes the service POST every new email there as an <code>email.received</code> event: <code>{"type":"email.received","timestamp","data":{…the email summary, "url", "raw_url", "web_url"}}</code>. Each call is signed with the <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> scheme (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>: HMAC-SHA256 with the <code>whsec_</code> secret shown once at creation). Delivery is at-least-once: answer 2xx within 10 s, or the call is retried about 1 s, 2 s, 4 s… later (at most 10 minutes apart) for the email's lifetime; a retried event keeps its <code>webhook-id</code>, so de-duplicate on it. <code>GET /api/v1/webhooks/{id}/deliveries</code> lists recent attempts. Loopback, private, link-local and metadata addresses are refused, at registration and again after DNS at each delivery${core.config.webhooks.allowPrivate ? ' (this instance allows them: EPHEMAIL_WEBHOOK_ALLOW_PRIVATE=true)' : ''}. Verify a call in TypeScript:</p>
<pre><code>${esc(VERIFY_SNIPPET)}</code></pre>
<h2 id="faults">SMTP faults on demand</h2>
<p>To test how a mailer handles a refusing or stalling server, a key can script faults for one address: <code>POST /api/v1/inboxes/{address}/faults</code> with <code>{"stage":"rcpt","reply":"451 4.7.1 Try again later","times":2}</code> answers that address's <code>RCPT TO</code> with the reply as given (other recipients of the transaction are unaffected); <code>"stage":"data"</code> answers the end of <code>DATA</code> of any transaction that has the address among its recipients (the whole transaction, nothing stored); <code>{"stage":"data","delay_seconds":20}</code> sends the final reply that much later (at most 120; the mail is then stored unless the client left) and <code>{"stage":"data","disconnect":true}</code> drops the connection instead. The reply is a 4xx or 5xx code with an enhanced status code of the same class, one line, at most 200 characters. Rules of an address apply in creation order; one with <code>times</code> is used up by that many transactions, across every node; omit it for a rule that holds until deleted. <code>GET</code> lists the key's rules, <code>DELETE …/faults</code> clears them, <code>DELETE …/faults/{id}</code> removes one. Rules expire with the inbox TTL (${core.config.emailTtlSeconds} s); at most 20 per address for each key and 1,000 per key (<code>conflict</code> past that). A revoked key's rules stop applying; the operator can list and remove any key's rules.</p>
<h2 id="endpoints">Endpoints</h2>${ops.join('\n')}
<h2 id="schemas">Schemas</h2>${schemas}
</body></html>`;
}

export function registerDocs(app: FastifyInstance, core: Core): void {
  let cached: string | null = null;
  app.get('/docs', { schema: { hide: true } }, async (_req, reply) => {
    cached ??= renderDocs(app.swagger(), core);
    return reply.type('text/html; charset=utf-8').header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'").send(cached);
  });
}
