// A validating proxy for the OpenAPI wire test (test/http/openapi-wire.test.ts): Prism
// (@stainless-api/prism-cli, docs/decisions.md "The OpenAPI wire check") in proxy mode in front of a
// real ephemail, over real sockets. Prism routes each request to the document's operation, forwards
// it, and checks the answer against that operation (is the status declared, is the media type one of
// the status's, does the body match its schema, the declared headers their schemas); what it finds
// comes back in the `sl-violations` header. Request validation is off (--validate-request=false): the
// test sends bad requests on purpose, and they must reach the service.
//
// Between Prism and the service sits a relay of ours that passes every request and answer through
// as it is and keeps the answer's exact bytes (by the request's `x-wire-id`), except where the
// client asks for what Prism cannot carry itself:
// - `x-wire-content-type: T`: the relay sends the body upstream as type T. Prism parses a JSON body
//   before forwarding it and answers an unparseable one itself, so a malformed JSON body goes to
//   Prism as text/plain and reaches the service as application/json, byte for byte.
// - `x-wire-sse-blocks: N`: the relay ends the answer after N blank-line-ended blocks. Prism reads an
//   answer whole before checking it, and an event stream does not end by itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { freePort, ROOT } from './serve.ts';
import { until } from './time.ts';

/** One finding of Prism's, as its `sl-violations` header lists them. */
export interface Violation {
  location: string[];
  severity: string;
  code?: string | number;
  message: string;
}

/** What the relay saw the service answer, exactly. */
export interface WireAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface WireProxy {
  /** Prism's address: send the traffic here. */
  url: string;
  /** The service's answer to the request sent with this `x-wire-id` (undefined: never reached the service). */
  answer(id: string): WireAnswer | undefined;
  /** What Prism printed (its warnings name each violation too). */
  output(): string;
  close(): Promise<void>;
}

const PRISM = resolve(ROOT, 'node_modules/@stainless-api/prism-cli/dist/index.js');
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** Parses an `sl-violations` header; one Prism cut short ("Too many violations! …") is one violation. */
export function parseViolations(header: string | null): Violation[] {
  if (!header) return [];
  try {
    return JSON.parse(header) as Violation[];
  } catch {
    return [{ location: ['response'], severity: 'Error', message: header.slice(0, 500) }];
  }
}

/** Starts the relay to `upstream` and Prism in front of it, checking against the OpenAPI file `documentFile`. */
export async function startWireProxy(documentFile: string, upstream: string): Promise<WireProxy> {
  const answers = new Map<string, WireAnswer>();
  const target = new URL(upstream);
  const relay = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const id = req.headers['x-wire-id'] as string | undefined;
      const asType = req.headers['x-wire-content-type'] as string | undefined;
      const blocks = Number(req.headers['x-wire-sse-blocks'] ?? 0);
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (v === undefined || k.startsWith('x-wire-') || HOP_BY_HOP.has(k) || k === 'host' || k === 'content-length') continue;
        headers[k] = v;
      }
      if (asType) headers['content-type'] = asType;
      if (body.length > 0 || req.method === 'POST') headers['content-length'] = String(body.length);
      const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (ures) => {
        const out: Buffer[] = [];
        const passHeaders: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(ures.headers)) if (v !== undefined && !HOP_BY_HOP.has(k) && !(blocks > 0 && k === 'content-length')) passHeaders[k] = v;
        res.writeHead(ures.statusCode ?? 502, passHeaders);
        let seen = 0;
        const finish = () => {
          if (id) answers.set(id, { status: ures.statusCode ?? 0, headers: ures.headers, body: Buffer.concat(out) });
          res.end();
        };
        ures.on('data', (c: Buffer) => {
          out.push(c);
          res.write(c);
          if (blocks > 0 && ures.statusCode === 200) {
            seen += (c.toString('utf8').match(/\n\n/g) ?? []).length;
            if (seen >= blocks) {
              ures.destroy();
              up.destroy();
              finish();
            }
          }
        });
        ures.on('end', () => { if (!res.writableEnded) finish(); });
        ures.on('error', () => { if (!res.writableEnded) finish(); });
      });
      up.on('error', (err) => {
        if (!res.headersSent) res.writeHead(599, { 'content-type': 'text/plain' });
        if (!res.writableEnded) res.end(`relay: ${err.message}`);
      });
      up.end(body);
    });
  });
  await new Promise<void>((ok) => relay.listen(0, '127.0.0.1', ok));
  const relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;

  const port = await freePort();
  let out = '';
  const child: ChildProcess = spawn(process.execPath, [PRISM, 'proxy', documentFile, relayUrl, '--port', String(port), '--host', '127.0.0.1', '--cors=false', '--errors=false', '--validate-request=false', '-v', 'warn'], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  let exited = false;
  child.once('exit', () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  // Prism prints nothing at -v warn when it is up: its port answers
  await until(async () => {
    if (exited) throw new Error(`prism exited before listening:\n${out}`);
    return fetch(`${url}/api/v1/health`).then(() => true, () => false);
  }, 'prism listens', 60_000, 50);
  return {
    url,
    answer: (id) => answers.get(id),
    output: () => out,
    async close() {
      process.off('exit', kill);
      if (!exited) {
        child.kill('SIGKILL');
        await until(() => exited, 'prism exits', 10_000);
      }
      await new Promise<void>((ok) => relay.close(() => ok()));
      relay.closeAllConnections();
    },
  };
}
