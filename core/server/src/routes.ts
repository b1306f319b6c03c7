import { API_ROUTES, expressPath, ROUTE_IDS, type RouteId } from '@compresso/schema';
import type express from 'express';
import type { RequestHandler } from 'express';

/**
 * Registers the API's routes from @compresso/schema's table: the method and path come from the
 * table, never from a string here, and `finish()` refuses to build an app that leaves a route of the
 * table without a handler, then answers every other method on the table's paths with 405 and Allow.
 */
export interface RouteRegistrar {
  add(id: RouteId, ...handlers: RequestHandler[]): void;
  /** `extra`: paths outside the table (operator endpoints) and their methods, for the 405s. */
  finish(extra?: Record<string, string[]>): Map<string, string[]>;
}

export function routeRegistrar(app: express.Express): RouteRegistrar {
  const registered = new Set<RouteId>();
  return {
    add(id, ...handlers) {
      if (registered.has(id)) throw new Error(`route ${id} registered twice`);
      registered.add(id);
      const route = API_ROUTES[id];
      const path = expressPath(route.path);
      if (route.method === 'GET') app.get(path, ...handlers);
      else if (route.method === 'POST') app.post(path, ...handlers);
      else app.delete(path, ...handlers);
    },
    finish(extra = {}) {
      const missing = ROUTE_IDS.filter((id) => !registered.has(id));
      if (missing.length) {
        throw new Error(`routes of @compresso/schema's API_ROUTES without a handler: ${missing.join(', ')}`);
      }
      const allowed = new Map<string, string[]>();
      for (const id of ROUTE_IDS) {
        const { path, method } = API_ROUTES[id];
        const key = expressPath(path);
        allowed.set(key, [...(allowed.get(key) ?? []), method]);
      }
      for (const [path, methods] of Object.entries(extra)) allowed.set(path, methods);
      return allowed;
    },
  };
}
