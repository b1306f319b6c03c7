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
  /** No answer, or a 5xx: the store is down (a 503 to callers). Anything else is a bug or bad setup. */
  const translate = (error: unknown): unknown => {
    const status = statusOf(error);
    if (status === undefined || status >= 500) {
      return new CompressoError(
        'SERVICE_UNAVAILABLE',
        `The blob store (${where}) is unavailable: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    return error;
  };

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
        // Not readable (missing bucket, wrong credentials) is as unavailable as down, for /readyz.
        const status = statusOf(error);
        throw status !== undefined && status < 500
          ? new CompressoError(
              'SERVICE_UNAVAILABLE',
              `The blob store (${where}) answered ${status}: check S3_BUCKET and the credentials.`,
              { cause: error },
            )
          : translate(error);
      }
    },

    async close() {
      client.destroy();
    },
  };
}
