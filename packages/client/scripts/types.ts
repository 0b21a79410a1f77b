// The client's types, generated from the service's own OpenAPI document (openapi-typescript):
// `node --import tsx packages/client/scripts/types.ts` writes src/schema.d.ts; the drift test
// (test/client/client.test.ts) fails when the checked-in file differs from what this makes now.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { assemble } from '../../../src/assemble.ts';
import { loadConfig } from '../../../src/config.ts';

export const SCHEMA_FILE = fileURLToPath(new URL('../src/schema.d.ts', import.meta.url));

const HEADER = '// Generated from the ephemail OpenAPI document by packages/client/scripts/types.ts. Do not edit.\n';

export async function generateTypes(): Promise<string> {
  const config = loadConfig({ EPHEMAIL_HTTP_PORT: '0', EPHEMAIL_SMTP_PORT: '0', EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_LOG_LEVEL: 'silent', EPHEMAIL_PUBLIC_URL: 'http://localhost:8025' });
  const service = await assemble(config, { mounts: [] });
  try {
    await service.app.ready();
    const doc = (await service.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    return HEADER + astToString(await openapiTS(doc));
  } finally {
    await service.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(SCHEMA_FILE, await generateTypes());
  console.log(`wrote ${SCHEMA_FILE}`);
}
