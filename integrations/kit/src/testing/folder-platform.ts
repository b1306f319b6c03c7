import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { type Clock, systemClock } from '../clock.ts';
import { type Pacer, pacedCall, type ThrottleStatus } from '../pacer.ts';
import { PlatformError } from '../platform-error.ts';
import type {
  AssetContext,
  AssetPage,
  CallOptions,
  FetchedAsset,
  PlatformAsset,
  PlatformPort,
} from '../port.ts';
import { sameImageKind } from '../port.ts';
import type { SeedAsset } from './memory-platform.ts';

/**
 * A second reference platform, kept on disk: a site is a directory of image files (the id is the
 * file name), alt text and context sit in `.meta/`, a replacement is written beside the file and
 * renamed over it. Because its state is files, several processes see one platform — which is what a
 * test needs to kill a worker process (SIGKILL) in the middle of a bulk run and let another finish it.
 * It passes the same port battery as the in-memory one.
 */
export interface FolderPlatformOptions {
  root: string;
  clock?: Clock;
  pacer?: Pacer;
  /** A leaky bucket per site and process, as the in-memory platform's. */
  bucket?: { size: number; restorePerSecond: number };
  maxAltTextLength?: number;
}

export interface FolderPlatform {
  port: PlatformPort;
  addSite(site: string, name?: string): void;
  addAsset(site: string, asset: SeedAsset): string;
  bytesOf(site: string, assetId: string): Uint8Array;
  /** Every replacement any process made on the site, in order (one line each in `.meta/replacements.log`). */
  replacements(site: string): string[];
  readonly stats: { throttled: number };
}

const TYPES: Record<string, string> = {
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  gif: 'image/gif',
  avif: 'image/avif',
};
const typeOf = (name: string) => TYPES[name.split('.').pop()?.toLowerCase() ?? ''];
const COSTS = { list: 2, fetch: 1, replace: 10, alt: 10, context: 1 } as const;

interface Meta {
  altText: string | null;
  parentId?: string | undefined;
  context: AssetContext;
}

export function createFolderPlatform(options: FolderPlatformOptions): FolderPlatform {
  const clock = options.clock ?? systemClock;
  const maxAltTextLength = options.maxAltTextLength ?? 512;
  const buckets = new Map<string, { available: number; at: number }>();
  const stats = { throttled: 0 };

  const dirOf = (site: string) => {
    const dir = join(options.root, encodeURIComponent(site));
    if (!existsSync(join(dir, '.meta', 'site.json')))
      throw new PlatformError('UNAUTHORIZED', `site ${site} is not installed`);
    return dir;
  };
  const fileOf = (site: string, id: string) => {
    // Ids are plain file names of an image type: anything else names no asset.
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/.test(id) || !typeOf(id) || !existsSync(join(dirOf(site), id)))
      throw new PlatformError('NOT_FOUND', `asset ${id} not found on ${site}`);
    return join(dirOf(site), id);
  };
  const metaOf = (site: string, id: string): Meta => {
    const path = join(dirOf(site), '.meta', `${id}.json`);
    return existsSync(path)
      ? (JSON.parse(readFileSync(path, 'utf8')) as Meta)
      : { altText: null, context: {} };
  };
  const writeMeta = (site: string, id: string, meta: Meta) =>
    atomicWrite(join(dirOf(site), '.meta', `${id}.json`), Buffer.from(JSON.stringify(meta)));
  const view = (site: string, id: string): PlatformAsset => {
    const meta = metaOf(site, id);
    return {
      id,
      filename: id,
      contentType: typeOf(id)!,
      size: readFileSync(fileOf(site, id)).byteLength,
      altText: meta.altText,
      parentId: meta.parentId,
    };
  };

  async function answer<T>(site: string, operation: keyof typeof COSTS, work: () => T): Promise<T> {
    await Promise.resolve();
    dirOf(site);
    const cost = COSTS[operation];
    let status: ThrottleStatus | undefined;
    if (options.bucket) {
      const { size, restorePerSecond } = options.bucket;
      const last = buckets.get(site) ?? { available: size, at: clock.now() };
      const available = Math.min(size, last.available + ((clock.now() - last.at) / 1000) * restorePerSecond);
      status = { maximumAvailable: size, currentlyAvailable: available, restoreRate: restorePerSecond };
      if (available < cost) {
        buckets.set(site, { available, at: clock.now() });
        stats.throttled++;
        options.pacer?.observe(site, status);
        throw new PlatformError('THROTTLED', `${operation}: throttled`, {
          retryAfterMs: Math.ceil(((cost - available) / restorePerSecond) * 1000),
        });
      }
      buckets.set(site, { available: available - cost, at: clock.now() });
      status = { ...status, currentlyAvailable: available - cost };
    }
    const result = work();
    if (status) options.pacer?.observe(site, status);
    return result;
  }
  const call = <T>(
    site: string,
    operation: keyof typeof COSTS,
    signal: AbortSignal | undefined,
    work: () => T,
  ) =>
    options.pacer
      ? pacedCall({ pacer: options.pacer, clock, site, cost: COSTS[operation], signal }, () =>
          answer(site, operation, work),
        )
      : answer(site, operation, work);

  const names = (site: string) =>
    readdirSync(dirOf(site))
      .filter((name) => !name.startsWith('.') && typeOf(name))
      .sort();

  const port: PlatformPort = {
    platform: 'folder',
    maxAltTextLength,
    async listAssets(site, { cursor, limit = 50, signal } = {}): Promise<AssetPage> {
      let after = '';
      if (cursor) {
        try {
          const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown };
          if (typeof value.after !== 'string' || value.after === '') throw new Error('no position');
          after = value.after;
        } catch {
          throw new PlatformError(
            'INVALID',
            `listAssets: cursor ${JSON.stringify(cursor)} was not issued by this platform`,
          );
        }
      }
      return call(site, 'list', signal, () => {
        const rest = names(site).filter((name) => name > after);
        const page = rest.slice(0, limit);
        const last = page.at(-1);
        return {
          assets: page.map((id) => view(site, id)),
          cursor:
            rest.length > limit && last
              ? Buffer.from(JSON.stringify({ after: last })).toString('base64url')
              : null,
        };
      });
    },
    async countAssets(site, { signal }: CallOptions = {}) {
      return call(site, 'list', signal, () => names(site).length);
    },
    async fetchAsset(site, assetId, { signal }: CallOptions = {}): Promise<FetchedAsset> {
      return call(site, 'fetch', signal, () => ({
        asset: view(site, assetId),
        bytes: new Uint8Array(readFileSync(fileOf(site, assetId))),
      }));
    },
    async replaceAsset(site, assetId, replacement, { signal }: CallOptions = {}) {
      const path = fileOf(site, assetId);
      if (!sameImageKind(typeOf(assetId)!, replacement.contentType))
        throw new PlatformError(
          'INVALID',
          `replaceAsset: ${assetId} is ${typeOf(assetId)}; a replacement must keep it (received ${replacement.contentType})`,
        );
      return call(site, 'replace', signal, () => {
        atomicWrite(path, replacement.bytes);
        appendFileSync(join(dirOf(site), '.meta', 'replacements.log'), `${assetId}\n`);
        return view(site, assetId);
      });
    },
    async setAltText(site, assetId, altText, { signal }: CallOptions = {}) {
      if (altText !== null && altText.length > maxAltTextLength)
        throw new PlatformError(
          'INVALID',
          `setAltText: alt text is at most ${maxAltTextLength} characters, received ${altText.length}`,
        );
      fileOf(site, assetId);
      return call(site, 'alt', signal, () => {
        writeMeta(site, assetId, { ...metaOf(site, assetId), altText });
        return view(site, assetId);
      });
    },
    async assetContext(site, assetId, { signal }: CallOptions = {}) {
      fileOf(site, assetId);
      return call(site, 'context', signal, () => {
        const { name } = JSON.parse(readFileSync(join(dirOf(site), '.meta', 'site.json'), 'utf8')) as {
          name: string;
        };
        return { siteName: name, filename: assetId, ...metaOf(site, assetId).context };
      });
    },
  };

  return {
    port,
    stats,
    addSite(site, name = site) {
      const dir = join(options.root, encodeURIComponent(site));
      mkdirSync(join(dir, '.meta'), { recursive: true });
      atomicWrite(join(dir, '.meta', 'site.json'), Buffer.from(JSON.stringify({ name })));
    },
    addAsset(site, seed) {
      const id = seed.filename;
      if (existsSync(join(dirOf(site), id))) throw new Error(`addAsset: ${id} exists on ${site}`);
      atomicWrite(join(dirOf(site), id), seed.bytes);
      writeMeta(site, id, {
        altText: seed.altText ?? null,
        parentId: seed.parentId,
        context: seed.context ?? {},
      });
      return id;
    },
    bytesOf: (site, id) => new Uint8Array(readFileSync(fileOf(site, id))),
    replacements(site) {
      const path = join(dirOf(site), '.meta', 'replacements.log');
      return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : [];
    },
  };
}

/** Write beside, then rename over: a reader (or a kill) sees the old file or the new one, never a part. */
function atomicWrite(path: string, bytes: Uint8Array): void {
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(temp, bytes);
  renameSync(temp, path);
}
