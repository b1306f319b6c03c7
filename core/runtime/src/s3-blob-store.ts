import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { CompressoError } from '@compresso/schema';
import {
  type BlobBody,
  type BlobInfo,
  type BlobStore,
  checkBlobKey,
  checkBlobPrefix,
  DEFAULT_CONTENT_TYPE,
  type PutBlobOptions,
} from './blob-store.ts';

export interface S3BlobStoreOptions {
  bucket: string;
  /** An S3-compatible service (MinIO, Ceph, R2 …); unset means AWS S3 in `region`. */
  endpoint?: string;
  /** Default us-east-1. */
  region?: string;
  /** Unset: the AWS SDK's own chain (environment, shared files, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** `endpoint/bucket/key` URLs, which most S3-compatible services need (default: on with an endpoint). */
  forcePathStyle?: boolean;
  /** Longest wait for a connection, ms (default 3000): an unreachable store answers 503 quickly. */
  connectTimeoutMs?: number;
}

/** Parts of 8 MiB for streamed uploads of unknown length: memory stays at a few parts per upload. */
const PART_SIZE = 8 * 1024 * 1024;

/**
 * Node's socket errors for a store that cannot be reached or dropped the connection, and the SDK's
 * own timeout names: the sets the SDK's retry strategy treats as transient
 * (@smithy/service-error-classification), plus ECONNABORTED/ENETDOWN/EHOSTDOWN.
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
const TIMEOUT_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException']);

interface ErrorShape {
  name?: unknown;
  code?: unknown;
  cause?: unknown;
  errors?: unknown;
  $metadata?: { httpStatusCode?: number };
}

/**
 * Whether an error from the S3 SDK means the store is down rather than that this one call went wrong:
 * an HTTP answer of 5xx, or no answer at all because of the network (refused, reset, timed out, name
 * not resolved). Everything else — a 4xx, and errors with no status that are not the network (missing
 * credentials, a response the SDK could not parse, our own stream failing, an abort) — is not an
 * outage. The difference matters because the batch worker waits out an outage instead of spending an
 * attempt: an item-specific failure reported as an outage would be retried in vain until its limit.
 */
export function isS3Outage(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 5) return false;
  const e = error as ErrorShape;
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined) return status >= 500;
  if (e.name === 'AbortError') return false;
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return true;
  if (typeof e.name === 'string' && TIMEOUT_NAMES.has(e.name)) return true;
  // Node's connect to every address of a name fails as one AggregateError of socket errors.
  if (Array.isArray(e.errors) && e.errors.some((inner) => isS3Outage(inner, depth + 1))) return true;
  return isS3Outage(e.cause, depth + 1);
}

/**
 * Blobs in an S3 bucket through the official AWS SDK v3 (the client every S3-compatible service is
 * tested with; signing, retries and multipart uploads are not ours to get wrong). Bytes go up in one
 * PutObject; streams through lib-storage's `Upload`, which buffers one part at a time, so a stream
 * of unknown length needs no temporary file. S3 writes are atomic per object and read-after-write
 * consistent, which is the port's contract.
 */
export function s3BlobStore(options: S3BlobStoreOptions): BlobStore {
  const bucket = options.bucket;
  const custom = options.endpoint !== undefined;
  const client = new S3Client({
    region: options.region ?? 'us-east-1',
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    forcePathStyle: options.forcePathStyle ?? custom,
    // Recent SDKs add CRC checksums (and aws-chunked bodies) to every upload; many S3-compatible
    // servers reject those, so with a custom endpoint checksums are sent only where S3 requires them.
    ...(custom
      ? { requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' }
      : {}),
    requestHandler: { connectionTimeout: options.connectTimeoutMs ?? 3000, requestTimeout: 60_000 },
    maxAttempts: 3,
  });

  const where = `${options.endpoint ?? 'S3'} bucket ${bucket}`;
  const statusOf = (error: unknown) =>
    error instanceof S3ServiceException
      ? error.$metadata.httpStatusCode
      : (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  const isNotFound = (error: unknown) => {
    const name = (error as { name?: string })?.name;
    return name === 'NoSuchKey' || name === 'NotFound' || statusOf(error) === 404;
  };
  const unavailable = (error: unknown) =>
    new CompressoError(
      'SERVICE_UNAVAILABLE',
      `The blob store (${where}) is unavailable: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  /** Unreachable, or a 5xx: the store is down (a 503 to callers). Anything else is a bug or bad setup. */
  const translate = (error: unknown): unknown => (isS3Outage(error) ? unavailable(error) : error);

  const infoOf = (
    key: string,
    head: {
      ContentLength?: number | undefined;
      ContentType?: string | undefined;
      LastModified?: Date | undefined;
    },
  ): BlobInfo => ({
    key,
    size: head.ContentLength ?? 0,
    contentType: head.ContentType ?? DEFAULT_CONTENT_TYPE,
    lastModified: head.LastModified ?? new Date(0),
  });

  const head = async (key: string): Promise<BlobInfo | undefined> => {
    checkBlobKey(key);
    try {
      return infoOf(key, await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw translate(error);
    }
  };

  const getObject = async (key: string) => {
    checkBlobKey(key);
    try {
      return await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw translate(error);
    }
  };

  return {
    kind: 's3',

    async put(key, body: BlobBody, opts: PutBlobOptions = {}) {
      checkBlobKey(key);
      const contentType = opts.contentType ?? DEFAULT_CONTENT_TYPE;
      try {
        if (body instanceof Uint8Array) {
          await client.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: key,
              Body: body,
              ContentType: contentType,
              ContentLength: body.byteLength,
            }),
          );
        } else {
          const upload = new Upload({
            client,
            params: { Bucket: bucket, Key: key, Body: body as Readable, ContentType: contentType },
            partSize: PART_SIZE,
            queueSize: 2,
          });
          await upload.done();
        }
      } catch (error) {
        throw translate(error);
      }
      const stored = await head(key);
      if (!stored)
        throw new CompressoError(
          'SERVICE_UNAVAILABLE',
          `The blob store (${where}) lost ${key} right after storing it.`,
        );
      return stored;
    },

    async get(key) {
      const object = await getObject(key);
      if (!object?.Body) return undefined;
      try {
        const bytes = await object.Body.transformToByteArray();
        return { info: { ...infoOf(key, object), size: bytes.byteLength }, bytes };
      } catch (error) {
        throw translate(error);
      }
    },

    async getStream(key) {
      const object = await getObject(key);
      if (!object?.Body) return undefined;
      return { info: infoOf(key, object), stream: object.Body as Readable };
    },

    head,

    async delete(key) {
      checkBlobKey(key);
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      } catch (error) {
        if (!isNotFound(error)) throw translate(error);
      }
    },

    async *list(prefix = '') {
      checkBlobPrefix(prefix);
      let token: string | undefined;
      do {
        let page: ListObjectsV2CommandOutput;
        try {
          page = await client.send(
            new ListObjectsV2Command({
              Bucket: bucket,
              ...(prefix ? { Prefix: prefix } : {}),
              ...(token ? { ContinuationToken: token } : {}),
            }),
          );
        } catch (error) {
          throw translate(error);
        }
        for (const object of page.Contents ?? []) {
          if (object.Key === undefined) continue;
          yield { key: object.Key, size: object.Size ?? 0, lastModified: object.LastModified ?? new Date(0) };
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    },

    async ping() {
      try {
        await client.send(new HeadBucketCommand({ Bucket: bucket }));
      } catch (error) {
        // Not readable (missing bucket, wrong credentials, no credentials at all) is as unavailable
        // as down, for /readyz.
        const status = statusOf(error);
        throw status !== undefined && status < 500
          ? new CompressoError(
              'SERVICE_UNAVAILABLE',
              `The blob store (${where}) answered ${status}: check S3_BUCKET and the credentials.`,
              { cause: error },
            )
          : unavailable(error);
      }
    },

    async close() {
      client.destroy();
    },
  };
}
