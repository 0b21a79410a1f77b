// Helpers for the tool-endpoint tests: raw JSON-RPC over fetch, raw HTTP (to set Host), and the
// official SDK client connected over a real socket.
import { request as httpRequest } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { TestService } from '../helpers/service.ts';

export const INIT_PARAMS = (protocolVersion = '2025-11-25') => ({ protocolVersion, capabilities: {}, clientInfo: { name: 'ephemail-test', version: '1.0.0' } });

/** POSTs one JSON-RPC body (object or raw string) to /mcp with Accept: application/json only. */
export function rpc(svc: TestService, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${svc.http}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** tools/call over raw JSON-RPC; resolves with the parsed JSON-RPC response. */
export async function callRaw(svc: TestService, name: string, args: Record<string, unknown>, headers: Record<string, string> = {}, id = 1): Promise<any> {
  const res = await rpc(svc, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, headers);
  return res.json();
}

/** A raw HTTP request (fetch cannot set Host); resolves with status, headers and body text. */
export function rawHttp(url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: init.method ?? 'POST', headers: init.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** The official SDK client over Streamable HTTP, connected (initialize + initialized). */
export async function connectClient(svc: TestService, name = 'ephemail-test'): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${svc.http}/mcp`));
  await client.connect(transport);
  return { client, transport };
}

/** The single text content of a tool result. */
export function textOf(result: Record<string, unknown>): string {
  const content = result.content as { type: string; text?: string }[];
  if (!Array.isArray(content) || content.length !== 1 || content[0].type !== 'text') throw new Error(`expected one text content, got ${JSON.stringify(result.content)}`);
  return content[0].text ?? '';
}
