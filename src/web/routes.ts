// The web pages: placeholder until they land (issue 4).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../services/core.ts';

export function registerWeb(_app: FastifyInstance, _core: Core): void {}
