import { type Clock, systemClock } from '../clock.ts';
import { type Pacer, pacedCall, type ThrottleStatus } from '../pacer.ts';
import { PlatformError } from '../platform-error.ts';
import type {
  AssetContext,
  AssetPage,
  CallOptions,
  FetchedAsset,
  ListOptions,
  PlatformAsset,
  PlatformPort,
  Replacement,
} from '../port.ts';
import { sameImageKind } from '../port.ts';

/**
 * The reference platform: a store kept in memory, with what the kit's port asks of a real one —
 * paged listing with opaque cursors, in-place replacement keeping the id, alt text with a length
 * limit, context — and, when given a bucket, a cost budget answered the way Shopify's GraphQL Admin
 * API does (a THROTTLED refusal with the bucket's status). It is the port battery's first subject
 * and the kit's own tests' platform; the Shopify adapter passes the same battery over its fake.
 */
export interface MemoryPlatformOptions {
  clock?: Clock;
  pacer?: Pacer;
  /** A leaky bucket per site, as Shopify's: `size` points, `restorePerSecond` back a second. */
  bucket?: { size: number; restorePerSecond: number };
  maxAltTextLength?: number;
}

export interface SeedAsset {
  bytes: Uint8Array;
  filename: string;
  contentType: string;
  altText?: string | null;
  parentId?: string;
  context?: AssetContext;
}

type Operation = 'list' | 'fetch' | 'replace' | 'alt' | 'context';

/** Points each operation costs (a query is cheap, a mutation dear, as on Shopify). */
export const MEMORY_COSTS: Record<Operation, number> = {
  list: 2,
  fetch: 1,
  replace: 10,
  alt: 10,
  context: 1,
};

interface StoredAsset {
  seq: number;
  id: string;
  bytes: Uint8Array;
  filename: string;
  contentType: string;
  altText: string | null;
  parentId: string | undefined;
  context: AssetContext;
}

interface Site {
  name: string;
  assets: Map<string, StoredAsset>;
  bucket: { available: number; at: number } | undefined;
}

export interface MemoryPlatform {
  port: PlatformPort;
  addSite(site: string, name?: string): void;
  /** Put an image on the site (as a merchant uploading one); its new id. */
  addAsset(site: string, asset: SeedAsset): string;
  /** Change an asset's bytes behind the kit's back (a merchant uploading a new version). */
  overwrite(site: string, assetId: string, bytes: Uint8Array): void;
  removeAsset(site: string, assetId: string): void;
  /** The bytes the platform serves now. */
  bytesOf(site: string, assetId: string): Uint8Array;
  /** Make the next call of `operation` on the site fail with this error (fault injection). */
  failNext(site: string, operation: Operation, error: PlatformError): void;
  /** Calls answered per operation, and THROTTLED refusals. */
  readonly stats: Record<Operation, number> & { throttled: number; replacements: number };
  /** Every replacement, in order: the kit's own writes, for the "no loop" and "never twice" checks. */
  readonly replacements: { site: string; assetId: string; bytes: Uint8Array }[];
}

const encodeCursor = (seq: number) => Buffer.from(JSON.stringify({ after: seq })).toString('base64url');
function decodeCursor(cursor: string): number {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof value.after === 'number' && Number.isInteger(value.after) && value.after >= 0)
      return value.after;
  } catch {
    // falls through to the refusal
  }
  throw new PlatformError(
    'INVALID',
    `listAssets: cursor ${JSON.stringify(cursor)} was not issued by this platform`,
  );
}

export function createMemoryPlatform(options: MemoryPlatformOptions = {}): MemoryPlatform {
  const clock = options.clock ?? systemClock;
  const maxAltTextLength = options.maxAltTextLength ?? 512;
  const sites = new Map<string, Site>();
  const pending = new Map<string, PlatformError>();
  const stats = { list: 0, fetch: 0, replace: 0, alt: 0, context: 0, throttled: 0, replacements: 0 };
  const replacements: MemoryPlatform['replacements'] = [];
  let seq = 0;

  const siteOf = (site: string): Site => {
    const found = sites.get(site);
    if (!found) throw new PlatformError('UNAUTHORIZED', `site ${site} is not installed`);
    return found;
  };
  const assetOf = (site: string, id: string): StoredAsset => {
    const asset = siteOf(site).assets.get(id);
    if (!asset) throw new PlatformError('NOT_FOUND', `asset ${id} not found on ${site}`);
    return asset;
  };
  const view = (asset: StoredAsset): PlatformAsset => ({
    id: asset.id,
    filename: asset.filename,
    contentType: asset.contentType,
    size: asset.bytes.byteLength,
    altText: asset.altText,
    parentId: asset.parentId,
  });

  /** The platform's side of a call: spend the cost from the bucket or refuse it, report the status. */
  async function answer<T>(site: string, operation: Operation, work: () => T): Promise<T> {
    await Promise.resolve();
    const state = siteOf(site);
    const fault = pending.get(`${site} ${operation}`);
    if (fault) {
      pending.delete(`${site} ${operation}`);
      throw fault;
    }
    const cost = MEMORY_COSTS[operation];
    let status: ThrottleStatus | undefined;
    if (options.bucket && state.bucket) {
      const { size, restorePerSecond } = options.bucket;
      const restored = ((clock.now() - state.bucket.at) / 1000) * restorePerSecond;
      state.bucket = { available: Math.min(size, state.bucket.available + restored), at: clock.now() };
      status = {
        maximumAvailable: size,
        currentlyAvailable: state.bucket.available,
        restoreRate: restorePerSecond,
      };
      if (state.bucket.available < cost) {
        stats.throttled++;
        options.pacer?.observe(site, status);
        throw new PlatformError(
          'THROTTLED',
          `${operation}: throttled (${state.bucket.available} of ${cost} points)`,
          {
            retryAfterMs: Math.ceil(((cost - state.bucket.available) / restorePerSecond) * 1000),
          },
        );
      }
      state.bucket.available -= cost;
      status = { ...status, currentlyAvailable: state.bucket.available };
    }
    const result = work();
    stats[operation]++;
    if (status) options.pacer?.observe(site, status);
    return result;
  }

  const call = <T>(site: string, operation: Operation, signal: AbortSignal | undefined, work: () => T) =>
    options.pacer
      ? pacedCall({ pacer: options.pacer, clock, site, cost: MEMORY_COSTS[operation], signal }, () =>
          answer(site, operation, work),
        )
      : answer(site, operation, work);

  const port: PlatformPort = {
    platform: 'memory',
    maxAltTextLength,
    async listAssets(site, { cursor, limit = 50, signal }: ListOptions = {}): Promise<AssetPage> {
      const after = cursor ? decodeCursor(cursor) : 0;
      if (!(Number.isInteger(limit) && limit >= 1 && limit <= 250))
        throw new PlatformError(
          'INVALID',
          `listAssets: limit must be a whole number from 1 to 250, received ${limit}`,
        );
      return call(site, 'list', signal, () => {
        const rest = [...siteOf(site).assets.values()]
          .filter((a) => a.seq > after)
          .sort((a, b) => a.seq - b.seq);
        const page = rest.slice(0, limit);
        const last = page.at(-1);
        return {
          assets: page.map(view),
          cursor: rest.length > limit && last ? encodeCursor(last.seq) : null,
        };
      });
    },
    async countAssets(site, { signal }: CallOptions = {}) {
      return call(site, 'list', signal, () => siteOf(site).assets.size);
    },
    async fetchAsset(site, assetId, { signal }: CallOptions = {}): Promise<FetchedAsset> {
      return call(site, 'fetch', signal, () => {
        const asset = assetOf(site, assetId);
        return { asset: view(asset), bytes: new Uint8Array(asset.bytes) };
      });
    },
    async replaceAsset(site, assetId, replacement: Replacement, { signal }: CallOptions = {}) {
      const current = assetOf(site, assetId);
      if (!sameImageKind(current.contentType, replacement.contentType))
        throw new PlatformError(
          'INVALID',
          `replaceAsset: ${assetId} is ${current.contentType}; a replacement must keep it (received ${replacement.contentType})`,
        );
      return call(site, 'replace', signal, () => {
        const asset = assetOf(site, assetId);
        asset.bytes = new Uint8Array(replacement.bytes);
        stats.replacements++;
        replacements.push({ site, assetId, bytes: asset.bytes });
        return view(asset);
      });
    },
    async setAltText(site, assetId, altText, { signal }: CallOptions = {}) {
      if (altText !== null && altText.length > maxAltTextLength)
        throw new PlatformError(
          'INVALID',
          `setAltText: alt text is at most ${maxAltTextLength} characters, received ${altText.length}`,
        );
      return call(site, 'alt', signal, () => {
        const asset = assetOf(site, assetId);
        asset.altText = altText;
        return view(asset);
      });
    },
    async getAsset(site, assetId, { signal }: CallOptions = {}) {
      return call(site, 'fetch', signal, () => view(assetOf(site, assetId)));
    },
    async assetContext(site, assetId, { signal }: CallOptions = {}) {
      return call(site, 'context', signal, () => {
        const asset = assetOf(site, assetId);
        return { siteName: siteOf(site).name, filename: asset.filename, ...asset.context };
      });
    },
  };

  return {
    port,
    stats,
    replacements,
    addSite(site, name = site) {
      if (sites.has(site)) return;
      sites.set(site, {
        name,
        assets: new Map(),
        bucket: options.bucket ? { available: options.bucket.size, at: clock.now() } : undefined,
      });
    },
    addAsset(site, seed) {
      const state = siteOf(site);
      const n = ++seq;
      const id = `memory://${site}/asset/${n}`;
      state.assets.set(id, {
        seq: n,
        id,
        bytes: new Uint8Array(seed.bytes),
        filename: seed.filename,
        contentType: seed.contentType,
        altText: seed.altText ?? null,
        parentId: seed.parentId,
        context: seed.context ?? {},
      });
      return id;
    },
    overwrite(site, assetId, bytes) {
      assetOf(site, assetId).bytes = new Uint8Array(bytes);
    },
    removeAsset(site, assetId) {
      siteOf(site).assets.delete(assetId);
    },
    bytesOf(site, assetId) {
      return new Uint8Array(assetOf(site, assetId).bytes);
    },
    failNext(site, operation, error) {
      pending.set(`${site} ${operation}`, error);
    },
  };
}
