import type { Readable } from 'node:stream';

/**
 * The blob store port: original and produced files (batch inputs and results, backups, generated
 * images). Two backends: `fileBlobStore()` (a directory, the embedded default) and `s3BlobStore()`
 * (any S3-compatible object store, through the official AWS SDK), chosen by S3_BUCKET.
 * `test/conformance/blob-store.test.ts` is the battery every backend passes.
 *
 * Contract, whichever backend:
 * - Keys are relative paths of segments `[A-Za-z0-9_-][A-Za-z0-9._-]*` joined by '/', at most 512
 *   characters (`jobs/123/out/photo.webp`): no empty, '.' or '..' segment, nothing starting with '/'
 *   or '.', no backslash. A bad key throws a TypeError naming it — keys are made by the program, never
 *   taken from a request as they are.
 * - `put` replaces atomically: a reader sees the old bytes or the new ones, never a part.
 * - `delete` of a missing key is not an error (S3 semantics); `get`/`head` of one give undefined.
 * - A key may also be the start of others (`a` and `a/b` both exist), as on S3.
 */

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** A blob as listed: what every backend's listing gives without one request per blob. */
export interface BlobEntry {
  key: string;
  size: number;
  /** When it was last written. */
  lastModified: Date;
}

export interface BlobInfo extends BlobEntry {
  /** As given to put; `application/octet-stream` when none was. */
  contentType: string;
}

export interface PutBlobOptions {
  contentType?: string;
}

/** Bytes, or a stream of them (a Node Readable or a web ReadableStream) for large files. */
export type BlobBody = Uint8Array | Readable | ReadableStream<Uint8Array>;

export interface BlobStore {
  readonly kind: 'file' | 's3';
  /** Store (or replace) a blob; resolves once it is durable, with what was stored. */
  put(key: string, body: BlobBody, options?: PutBlobOptions): Promise<BlobInfo>;
  /** The whole blob in memory. */
  get(key: string): Promise<{ info: BlobInfo; bytes: Uint8Array } | undefined>;
  /** The blob as a stream, for large files and HTTP downloads. */
  getStream(key: string): Promise<{ info: BlobInfo; stream: Readable } | undefined>;
  head(key: string): Promise<BlobInfo | undefined>;
  delete(key: string): Promise<void>;
  /**
   * Every blob whose key starts with `prefix` (a plain string prefix, `jobs/1` also matches `jobs/10/…`).
   * No order is promised: S3 lists in byte order, some S3-compatible servers do not.
   */
  list(prefix?: string): AsyncIterable<BlobEntry>;
  /** Cheap round trip proving the store answers (for /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
export const MAX_BLOB_KEY = 512;

/** Throws a TypeError naming the key unless it is a valid blob key (see the port's contract). */
export function checkBlobKey(key: string): void {
  const ok =
    typeof key === 'string' &&
    key.length > 0 &&
    key.length <= MAX_BLOB_KEY &&
    key.split('/').every((s) => SEGMENT.test(s));
  if (!ok) {
    throw new TypeError(
      `blob key: expected segments of letters, digits, '.', '_' or '-' joined by '/', not starting with '.' or '/', at most ${MAX_BLOB_KEY} characters (received ${JSON.stringify(String(key).slice(0, 100))})`,
    );
  }
}

/** A list prefix may end in '/' or in part of a segment; checked like a key with a placeholder end. */
export function checkBlobPrefix(prefix: string): void {
  if (prefix === '') return;
  checkBlobKey(prefix.endsWith('/') ? `${prefix}x` : prefix);
}
