import { API_ROUTES, BODY_MEMBERS, type BodyName, type RouteId, routePath } from '@compresso/schema/wire';
import type { WireRequest } from './transport.ts';

/** Method and path of a route of the contract's table (the table is built into this package). */
export function route(
  id: RouteId,
  params?: Readonly<Record<string, string | number>>,
): { method: WireRequest['method']; path: string } {
  return { method: API_ROUTES[id].method, path: routePath(id, params) };
}

const camel = (name: string) => name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

export interface BodyMapping {
  /** The client's name for a member, where it is not the camelCase of the wire name. */
  rename?: Readonly<Record<string, string>>;
  /** Members holding another body (or a list of them), and how to map each. */
  nested?: Readonly<Record<string, (value: unknown) => unknown>>;
}

/**
 * A JSON body of the contract as the client's camelCase object: every member the contract's body
 * table lists for `name`, under its camelCase name (or `rename`'s), nested bodies mapped the same way;
 * a member the answer does not carry (an optional one) is left out. The one mapping for keys, usage
 * and jobs: a member added to a body in @compresso/schema arrives here with no client edit, and the
 * client's contract test fails its type-check until the client's declared types name it.
 */
export function bodyFromWire<T>(name: BodyName, wire: unknown, mapping: BodyMapping = {}): T {
  const source = (wire ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const member of BODY_MEMBERS[name] as readonly string[]) {
    const value = source[member];
    if (value === undefined) continue;
    const convert = mapping.nested?.[member];
    out[mapping.rename?.[member] ?? camel(member)] = convert ? convert(value) : value;
  }
  return out as T;
}
