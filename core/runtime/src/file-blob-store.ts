import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  type BlobBody,
  type BlobEntry,
  type BlobInfo,
  type BlobStore,
  checkBlobKey,
  checkBlobPrefix,
  DEFAULT_CONTENT_TYPE,
  type PutBlobOptions,
} from './blob-store.ts';

export interface FileBlobStoreOptions {
  /** The directory blobs live in (created when missing). */
  root: string;
}

/**
 * On disk, key `a/b` is the file `<root>/a/b~` and its content type the file `<root>/a/b~type`.
 * The '~' cannot occur in a key, so a key may also be a directory of others (`a` beside `a/b`) as on
 * S3, and nothing a caller names can collide with the bookkeeping (`.tmp`, the type files).
 */
const DATA = '~';
const TYPE = '~type';

const isMissing = (error: unknown) => {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

/**
 * Blobs as files under one directory: the embedded default (`<COMPRESSO_DATA_DIR>/blobs`). Writes go
 * to a temporary file in `<root>/.tmp`, are flushed to disk, then renamed over the old file: a reader
 * or a crash sees the old blob or the new one, never a part. One machine only: several processes on
 * one machine may share it, processes on several machines need the S3 backend.
 */
export function fileBlobStore(options: FileBlobStoreOptions): BlobStore {
  const root = options.root;
  const tmpDir = join(root, '.tmp');
  const pathOf = (key: string) => {
    checkBlobKey(key);
    return join(root, ...key.split('/')) + DATA;
  };

  const writeAtomically = async (target: string, body: BlobBody | string) => {
    await mkdir(tmpDir, { recursive: true });
    const tmp = join(tmpDir, `${randomBytes(8).toString('hex')}.part`);
    try {
      if (typeof body === 'string' || body instanceof Uint8Array) {
        const handle = await open(tmp, 'w');
        try {
          await handle.writeFile(body);
          await handle.sync();
        } finally {
          await handle.close();
        }
      } else {
        const source = body instanceof ReadableStream ? Readable.fromWeb(body as never) : body;
        // flush: fsync before close, so the rename below never publishes bytes still only in cache.
        await pipeline(source, createWriteStream(tmp, { flush: true }));
      }
      // A delete pruning empty directories may remove this one between mkdir and rename: once more.
      for (let tries = 0; ; tries++) {
        await mkdir(dirname(target), { recursive: true });
        try {
          await rename(tmp, target);
          break;
        } catch (error) {
          if (tries > 0 || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
      }
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    }
  };

  const info = async (key: string, path: string): Promise<BlobInfo | undefined> => {
    try {
      const [stats, type] = await Promise.all([
        stat(path),
        readFile(path.slice(0, -DATA.length) + TYPE, 'utf8').catch(() => DEFAULT_CONTENT_TYPE),
      ]);
      return { key, size: stats.size, contentType: type, lastModified: stats.mtime };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  };

  /** Every data file under `dir`, as keys (unordered). */
  async function* walk(dir: string): AsyncGenerator<string> {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isMissing(error)) return;
      throw error;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== '.tmp') yield* walk(path);
      } else if (entry.isFile() && entry.name.endsWith(DATA)) {
        yield relative(root, path).slice(0, -DATA.length).split(sep).join('/');
      }
    }
  }

  return {
    kind: 'file',

    async put(key, body, opts: PutBlobOptions = {}) {
      const path = pathOf(key);
      const contentType = opts.contentType ?? DEFAULT_CONTENT_TYPE;
      // Type first: a reader of the new bytes then never sees the old type (a crash between the two
      // renames leaves the old bytes with the new type, which the next put repairs).
      await writeAtomically(path.slice(0, -DATA.length) + TYPE, contentType);
      await writeAtomically(path, body);
      return (await info(key, path)) as BlobInfo;
    },

    async get(key) {
      const path = pathOf(key);
      const found = await info(key, path);
      if (!found) return undefined;
      try {
        const bytes = new Uint8Array(await readFile(path));
        return { info: { ...found, size: bytes.byteLength }, bytes };
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw error;
      }
    },

    async getStream(key) {
      const path = pathOf(key);
      let handle: import('node:fs/promises').FileHandle;
      try {
        // Opened before answering: the stream reads this file even if a put replaces it meanwhile.
        handle = await open(path, 'r');
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw error;
      }
      const found = await info(key, path);
      const stats = await handle.stat();
      // The handle's own stream closes the handle when it ends, fails or is destroyed. (A stream on
      // `handle.fd` with autoClose off never emitted 'close' after a normal end, so each download
      // leaked its descriptor until garbage collection.)
      const stream = handle.createReadStream();
      return {
        info: {
          key,
          size: stats.size,
          contentType: found?.contentType ?? DEFAULT_CONTENT_TYPE,
          lastModified: stats.mtime,
        },
        stream,
      };
    },

    async head(key) {
      return info(key, pathOf(key));
    },

    async delete(key) {
      const path = pathOf(key);
      await rm(path, { force: true });
      await rm(path.slice(0, -DATA.length) + TYPE, { force: true });
      // Drop directories left empty, so a store that churns keys does not grow a tree of them.
      for (let dir = dirname(path); dir.length > root.length && dir.startsWith(root); dir = dirname(dir)) {
        try {
          await rmdir(dir);
        } catch {
          break; // not empty (or raced by a put): stop here
        }
      }
    },

    async *list(prefix = '') {
      checkBlobPrefix(prefix);
      const cut = prefix.lastIndexOf('/');
      const base = cut < 0 ? root : join(root, ...prefix.slice(0, cut).split('/'));
      const keys: string[] = [];
      for await (const key of walk(base)) if (key.startsWith(prefix)) keys.push(key);
      // Sorted as S3 lists (byte order of the whole key; a directory walk would put 'a/b' before 'a-c').
      keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const key of keys) {
        const stats = await stat(pathOf(key)).catch((error: unknown) => {
          if (isMissing(error)) return undefined; // deleted since the walk
          throw error;
        });
        if (stats) yield { key, size: stats.size, lastModified: stats.mtime } satisfies BlobEntry;
      }
    },

    async ping() {
      await mkdir(root, { recursive: true });
      await stat(root);
    },

    async close() {},
  };
}
