// POST /mcp: placeholder until the tool endpoint lands (issue 3).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../services/core.ts';

export function registerMcp(_app: FastifyInstance, _core: Core): void {}
