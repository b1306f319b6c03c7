import {
  type DocumentNode,
  type FieldNode,
  type GraphQLSchema,
  parse,
  type SelectionSetNode,
  validate,
} from 'graphql';

/**
 * The fake's bulk query operations, as Shopify's bulk operations guide and the `BulkOperation`
 * reference describe them: `bulkOperationRunQuery` takes a query document with at least one
 * connection (at most five, nested at most two levels), runs it in the background (CREATED →
 * RUNNING → COMPLETED, `objectCount` and `rootObjectCount` counting as it goes) over the whole data
 * set — pagination arguments do not apply — and writes the result as JSONL: one JSON object a line,
 * connections flattened (no `edges`/`node` wrappers), each object of a nested connection on its own
 * line with `__parentId` naming the object it belongs to. The result `url` is served by the fake (a
 * signed storage URL on Shopify: fetched without the access token). One bulk query at a time per
 * shop and app (the 2025-10 rule); another while one runs is a user error.
 */
export type BulkStatus =
  | 'CANCELED'
  | 'CANCELING'
  | 'COMPLETED'
  | 'CREATED'
  | 'EXPIRED'
  | 'FAILED'
  | 'RUNNING';

export interface FakeBulkOperation {
  id: string;
  shop: string;
  query: string;
  type: 'QUERY';
  status: BulkStatus;
  errorCode: string | null;
  objectCount: number;
  rootObjectCount: number;
  createdAt: string;
  completedAt: string | null;
  /** The path part of the result URL (a random token). */
  token: string;
  /** The JSONL result, once COMPLETED. */
  jsonl?: Buffer;
}

/** Why Shopify would refuse this bulk query (the userErrors message), or null when it runs. */
export function bulkQueryProblem(schema: GraphQLSchema, query: string): string | null {
  let document: DocumentNode;
  try {
    document = parse(query);
  } catch (error) {
    return `Invalid bulk query: ${(error as Error).message}`;
  }
  const operations = document.definitions.filter((d) => d.kind === 'OperationDefinition');
  if (operations.length !== 1 || operations[0]?.operation !== 'query')
    return 'Invalid bulk query: the document must hold one query operation.';
  const problems = validate(schema, document);
  if (problems.length > 0) return `Invalid bulk query: ${problems[0]?.message}`;
  let connections = 0;
  let deepest = 0;
  const walk = (set: SelectionSetNode | undefined, depth: number) => {
    for (const selection of set?.selections ?? []) {
      if (selection.kind === 'InlineFragment') walk(selection.selectionSet, depth);
      if (selection.kind !== 'Field') continue;
      const isConnection = (selection as FieldNode).selectionSet?.selections.some(
        (s) => s.kind === 'Field' && (s.name.value === 'edges' || s.name.value === 'nodes'),
      );
      if (isConnection) {
        connections++;
        deepest = Math.max(deepest, depth + 1);
        walk(selection.selectionSet, depth + 1);
      } else walk(selection.selectionSet, depth);
    }
  };
  walk(operations[0].selectionSet, 0);
  if (connections === 0) return 'Bulk queries must contain at least one connection.';
  if (connections > 5) return 'Bulk queries cannot contain more than 5 connections.';
  if (deepest > 2) return 'Bulk queries cannot contain connections with a nesting depth greater than 2.';
  return null;
}

const isConnection = (value: unknown): value is { edges?: { node: unknown }[]; nodes?: unknown[] } =>
  !!value &&
  typeof value === 'object' &&
  (Array.isArray((value as { edges?: unknown }).edges) ||
    Array.isArray((value as { nodes?: unknown }).nodes));

/**
 * A query's result data as bulk JSONL lines: every node of every connection on a line of its own,
 * a nested connection's nodes after their parent with `__parentId` (Shopify does not promise this
 * order without `groupObjects`; a reader must not rely on it).
 */
export function* bulkLines(
  data: Record<string, unknown>,
  counts: { objects: number; roots: number },
): Generator<string> {
  function* connection(
    value: { edges?: { node: unknown }[]; nodes?: unknown[] },
    parentId: unknown,
    depth: number,
  ): Generator<string> {
    const nodes = value.edges ? value.edges.map((e) => e.node) : (value.nodes ?? []);
    for (const node of nodes) {
      const own: Record<string, unknown> = {};
      const children: { edges?: { node: unknown }[]; nodes?: unknown[] }[] = [];
      for (const [key, field] of Object.entries((node ?? {}) as Record<string, unknown>)) {
        if (isConnection(field)) children.push(field);
        else own[key] = field;
      }
      if (parentId !== undefined) own.__parentId = parentId;
      counts.objects++;
      if (depth === 0) counts.roots++;
      yield JSON.stringify(own);
      for (const child of children) yield* connection(child, own.id, depth + 1);
    }
  }
  for (const value of Object.values(data)) if (isConnection(value)) yield* connection(value, undefined, 0);
}

/** The BulkOperation object as the API shows it (UnsignedInt64 fields are strings in JSON). */
export function bulkView(op: FakeBulkOperation, url: string | null) {
  return {
    __typename: 'BulkOperation',
    id: op.id,
    completedAt: op.completedAt,
    createdAt: op.createdAt,
    errorCode: op.errorCode,
    fileSize: op.jsonl ? String(op.jsonl.length) : null,
    objectCount: String(op.objectCount),
    partialDataUrl: null,
    query: op.query,
    rootObjectCount: String(op.rootObjectCount),
    status: op.status,
    type: op.type,
    url: op.status === 'COMPLETED' ? url : null,
  };
}
