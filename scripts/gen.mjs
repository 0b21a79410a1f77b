#!/usr/bin/env node
// `npm run gen`: writes the checked-in files made from the service's own definitions: the client's
// types (packages/client/src/schema.d.ts) from the live OpenAPI document, itself made from the routes
// and the views registry (src/derive/registry.ts). Run it after changing a route or a view; the drift
// test (test/client/client.test.ts) fails until the checked-in files are current. (The OpenAPI
// document itself is served at /api/v1/openapi.json, not checked in.)
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'packages', 'client', 'scripts', 'types.ts')], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
