import { createInterface, type Interface } from 'node:readline';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { type AssetPage, type PlatformAsset, PlatformError } from '@compresso/integration-kit';

/**
 * A whole catalog's images through one bulk query operation (Shopify's bulk operations guide):
 * `bulkOperationRunQuery` with the products and their image media, polled through `node(id)` until
 * COMPLETED, then the JSONL result read as a stream — `readline` over the response body, one line in
 * hand at a time, never the whole file in memory. Media lines are the images (`__parentId` names
 * their product); product lines are passed over. The order of lines is not relied on.
 *
 * The cursor (`shb1.<operation>.<position>`) is the operation's number and how many images were
 * handed out, so it survives a restart: a new process reopens the same result and skips that many
 * images (streaming). In the same process the open stream goes on where the last page stopped. An
 * operation that failed, was cancelled, or whose result expired (Shopify keeps it seven days) is
 * replaced by a new one, read from the same position.
 */
export const BULK_CURSOR = 'shb1.';

/** The document run in bulk. Pagination arguments do not apply to bulk queries. */
export const BULK_QUERY = `{
  products {
    edges {
      node {
        id
        media(query: "media_type:IMAGE") {
          edges { node { ... on MediaImage { id alt mimeType originalSource { url fileSize } } } }
        }
      }
    }
  }
}`;

const RUN_MUTATION = /* GraphQL */ `
  mutation CompressoBulkList($query: String!) {
    bulkOperationRunQuery(query: $query, groupObjects: false) {
      bulkOperation { id status }
      userErrors { field message code }
    }
  }
`;

const OPERATION_QUERY = /* GraphQL */ `
  query CompressoBulkOperation($id: ID!) {
    node(id: $id) { ... on BulkOperation { id status errorCode objectCount rootObjectCount url } }
  }
`;

const CURRENT_QUERY = /* GraphQL */ `
  query CompressoCurrentBulk { currentBulkOperation(type: QUERY) { id status query } }
`;

const COUNT_QUERY = /* GraphQL */ `
  query CompressoProductsCount { productsCount { count } }
`;

/** Requested costs (Shopify's rule: an object 1, a mutation 10). */
const COST = { mutation: 10, object: 1 } as const;

type Gql = <T>(
  shop: string,
  cost: number,
  query: string,
  variables: Record<string, unknown>,
  signal?: AbortSignal,
) => Promise<T>;

interface MediaLine {
  id?: string;
  alt?: string | null;
  mimeType?: string | null;
  originalSource?: { url?: string | null; fileSize?: number | string | null } | null;
  __parentId?: string;
}

interface Reader {
  op: string;
  /** Images handed out so far. */
  position: number;
  lines: AsyncIterator<string>;
  rl: Interface;
  body: Readable;
  /** The next image, read ahead to know whether there is one. */
  peeked: PlatformAsset | null | undefined;
  idle: NodeJS.Timeout | undefined;
}

export interface BulkListingOptions {
  gql: Gql;
  fetch: typeof fetch;
  /** How often a running operation is polled (default 2 s). */
  pollMs?: number;
  /** An unused open result stream is closed after this long (default 60 s); a later page reopens it. */
  idleMs?: number;
  filenameOf(url: string): string;
}

export interface BulkListing {
  /** A page of the catalog from a bulk cursor, or (cursor null) a new bulk operation. */
  page(shop: string, cursor: string | null, limit: number, signal?: AbortSignal): Promise<AssetPage>;
  /** The shop's number of products (`productsCount`), to choose bulk or incremental listing. */
  products(shop: string, signal?: AbortSignal): Promise<number>;
  /** Close every open result stream. */
  close(): void;
}

function encode(op: string, position: number): string {
  return `${BULK_CURSOR}${op.split('/').pop()}.${position}`;
}

function decode(cursor: string): { op: string; position: number } {
  const match = /^shb1\.(\d+)\.(\d+)$/.exec(cursor);
  if (!match) throw new PlatformError('INVALID', `Not a cursor this adapter issued: ${cursor.slice(0, 40)}`);
  return { op: `gid://shopify/BulkOperation/${match[1]}`, position: Number(match[2]) };
}

export function bulkListing(options: BulkListingOptions): BulkListing {
  const { gql } = options;
  const pollMs = options.pollMs ?? 2000;
  const idleMs = options.idleMs ?? 60_000;
  const readers = new Map<string, Reader>();

  function close(shop: string): void {
    const reader = readers.get(shop);
    if (!reader) return;
    readers.delete(shop);
    clearTimeout(reader.idle);
    reader.rl.close();
    reader.body.destroy();
  }

  function touch(shop: string, reader: Reader): void {
    clearTimeout(reader.idle);
    reader.idle = setTimeout(() => {
      if (readers.get(shop) === reader) close(shop);
    }, idleMs);
    reader.idle.unref();
  }

  function assetOf(line: MediaLine): PlatformAsset {
    const url = line.originalSource?.url ?? '';
    const size = line.originalSource?.fileSize;
    return {
      id: line.id as string,
      filename: url ? options.filenameOf(url) : 'image',
      contentType: line.mimeType ?? 'application/octet-stream',
      size: size === null || size === undefined ? undefined : Number(size),
      altText: line.alt ? line.alt : null,
      parentId: line.__parentId,
    };
  }

  /** The next image line of the stream; null at its end. */
  async function next(reader: Reader): Promise<PlatformAsset | null> {
    if (reader.peeked !== undefined) {
      const peeked = reader.peeked;
      reader.peeked = undefined;
      return peeked;
    }
    for (;;) {
      const { value, done } = await reader.lines.next();
      if (done) return null;
      if (!value.trim()) continue;
      const line = JSON.parse(value) as MediaLine;
      if (typeof line.id === 'string' && line.id.includes('/MediaImage/')) return assetOf(line);
    }
  }

  async function open(shop: string, op: string, url: string, position: number, signal?: AbortSignal) {
    close(shop);
    let response: Response;
    try {
      response = await options.fetch(url, signal ? { signal } : {});
    } catch (error) {
      throw new PlatformError('UNAVAILABLE', `Bulk result download failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (!response.ok || !response.body) {
      await response.arrayBuffer().catch(() => {});
      throw new PlatformError('UNAVAILABLE', `Bulk result answered ${response.status}`, {
        retryAfterMs: pollMs,
      });
    }
    const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
    const rl = createInterface({ input: body, crlfDelay: Number.POSITIVE_INFINITY });
    const reader: Reader = {
      op,
      position: 0,
      lines: rl[Symbol.asyncIterator](),
      rl,
      body,
      peeked: undefined,
      idle: undefined,
    };
    readers.set(shop, reader);
    // After a restart: pass over the images already handed out, reading (not keeping) them.
    while (reader.position < position) {
      if ((await next(reader)) === null) break;
      reader.position++;
    }
    return reader;
  }

  async function read(
    shop: string,
    reader: Reader,
    limit: number,
    total: number | undefined,
  ): Promise<AssetPage> {
    const assets: PlatformAsset[] = [];
    try {
      while (assets.length < limit) {
        const asset = await next(reader);
        if (asset === null) break;
        assets.push(asset);
      }
      reader.position += assets.length;
      reader.peeked = assets.length === limit ? await next(reader) : null;
    } catch (error) {
      close(shop);
      throw new PlatformError('UNAVAILABLE', `Bulk result stream broke: ${(error as Error).message}`, {
        retryAfterMs: 1000,
        cause: error,
      });
    }
    if (reader.peeked === null) {
      close(shop);
      return { assets, cursor: null, ...(total === undefined ? {} : { total }) };
    }
    touch(shop, reader);
    return { assets, cursor: encode(reader.op, reader.position), ...(total === undefined ? {} : { total }) };
  }

  async function start(shop: string, position: number, signal?: AbortSignal): Promise<AssetPage> {
    const data = await gql<{
      bulkOperationRunQuery: {
        bulkOperation: { id: string } | null;
        userErrors: { message: string; code?: string | null }[];
      } | null;
    }>(shop, COST.mutation, RUN_MUTATION, { query: BULK_QUERY }, signal);
    const payload = data.bulkOperationRunQuery;
    if (payload?.bulkOperation)
      return { assets: [], cursor: encode(payload.bulkOperation.id, position), waitMs: pollMs };
    const problem = payload?.userErrors[0];
    if (problem?.code === 'OPERATION_IN_PROGRESS') {
      // One bulk query per shop and app: a process before this one started ours (adopt it), or
      // another part of the app runs one (wait for it).
      const current = await gql<{ currentBulkOperation: { id: string; query: string } | null }>(
        shop,
        COST.object,
        CURRENT_QUERY,
        {},
        signal,
      );
      if (current.currentBulkOperation?.query.trim() === BULK_QUERY.trim())
        return { assets: [], cursor: encode(current.currentBulkOperation.id, position), waitMs: pollMs };
      throw new PlatformError('UNAVAILABLE', `Another bulk query runs on ${shop}: ${problem.message}`, {
        retryAfterMs: pollMs,
      });
    }
    throw new PlatformError('INVALID', `bulkOperationRunQuery: ${problem?.message ?? 'no operation'}`);
  }

  return {
    async page(shop, cursor, limit, signal) {
      if (cursor === null) return start(shop, 0, signal);
      const { op, position } = decode(cursor);
      const open_ = readers.get(shop);
      if (open_?.op === op && open_.position === position) return read(shop, open_, limit, undefined);
      const { node } = await gql<{
        node: {
          id: string;
          status: string;
          objectCount: string;
          rootObjectCount: string;
          url: string | null;
        } | null;
      }>(shop, COST.object, OPERATION_QUERY, { id: op }, signal);
      if (node?.status === 'CREATED' || node?.status === 'RUNNING' || node?.status === 'CANCELING')
        return { assets: [], cursor, waitMs: pollMs };
      if (node?.status !== 'COMPLETED' || !node.url) return start(shop, position, signal);
      const total = Number(node.objectCount) - Number(node.rootObjectCount);
      const reader = await open(shop, op, node.url, position, signal);
      return read(shop, reader, limit, total);
    },
    async products(shop, signal) {
      const data = await gql<{ productsCount: { count: number } }>(
        shop,
        COST.object,
        COUNT_QUERY,
        {},
        signal,
      );
      return data.productsCount.count;
    },
    close() {
      for (const shop of [...readers.keys()]) close(shop);
    },
  };
}
