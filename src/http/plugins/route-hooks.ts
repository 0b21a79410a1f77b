// Hooks that only some routes need, added to those routes alone (from an `onRoute` hook): a hook
// every request runs costs every request; one on the routes that need it costs nothing elsewhere.
import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';

type Hook = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;

/** Appends `hook` to the route's own `name` hooks (after any it has). */
export function appendRouteHook(route: RouteOptions, name: 'preValidation' | 'preHandler' | 'onResponse', hook: Hook): void {
  const own = route[name];
  (route as unknown as Record<string, Hook[]>)[name] = [...(own === undefined ? [] : Array.isArray(own) ? own : [own]) as Hook[], hook];
}
