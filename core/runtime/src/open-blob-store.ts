import type { BlobStore } from './blob-store.ts';
import type { Config } from './config.ts';
import { fileBlobStore } from './file-blob-store.ts';

/**
 * The blob store the configuration asks for. With S3_BUCKET: that bucket (S3_ENDPOINT for an
 * S3-compatible service), so every process on every machine sees the same files. Without it: files
 * under COMPRESSO_BLOB_DIR. The AWS SDK is loaded only in the first case.
 */
export async function openBlobStore(
  config: Pick<
    Config,
    | 's3Bucket'
    | 's3Endpoint'
    | 's3Region'
    | 's3AccessKeyId'
    | 's3SecretAccessKey'
    | 's3ForcePathStyle'
    | 'blobDir'
  >,
): Promise<BlobStore> {
  if (!config.s3Bucket) return fileBlobStore({ root: config.blobDir });
  if ((config.s3AccessKeyId === undefined) !== (config.s3SecretAccessKey === undefined)) {
    throw new Error(
      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: set both, or neither to use the AWS SDK's credential chain.",
    );
  }
  let s3BlobStore: typeof import('./s3-blob-store.ts').s3BlobStore;
  try {
    ({ s3BlobStore } = await import('./s3-blob-store.ts'));
  } catch (error) {
    throw new Error(
      `S3_BUCKET is set, so the blob store needs the AWS SDK: npm install @aws-sdk/client-s3 @aws-sdk/lib-storage (${(error as Error).message})`,
      { cause: error },
    );
  }
  return s3BlobStore({
    bucket: config.s3Bucket,
    region: config.s3Region,
    forcePathStyle: config.s3ForcePathStyle,
    ...(config.s3Endpoint ? { endpoint: config.s3Endpoint } : {}),
    ...(config.s3AccessKeyId && config.s3SecretAccessKey
      ? { credentials: { accessKeyId: config.s3AccessKeyId, secretAccessKey: config.s3SecretAccessKey } }
      : {}),
  });
}
