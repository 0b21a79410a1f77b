// The ceiling for benchmark 2: a bare Fastify app in its own `node` process, logger off, answering
// GET routes with fixed JSON bodies (the same bytes the real endpoints returned). Plain JavaScript:
// tsx only changes how modules load, not the request path, and this starts in a fraction of the time.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const port = Number(process.env.BARE_PORT ?? 0);
const bodies = JSON.parse(readFileSync(process.env.BARE_BODIES, 'utf8'));
const app = Fastify({ logger: false });
for (const [path, body] of Object.entries(bodies)) app.get(path, async () => body);
await app.listen({ port, host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
