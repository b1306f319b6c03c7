import { S3ServiceException } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { isS3Outage } from './s3-blob-store.ts';

/**
 * Which SDK errors count as the store being down, on the shapes the AWS SDK v3 and Node actually
 * produce (the conformance file drives the real ones it can: a refused port, a 503, a failing body).
 */
const serviceError = (name: string, status: number) =>
  new S3ServiceException({
    name,
    $fault: status >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode: status },
  });
const socketError = (code: string) =>
  Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code, $metadata: { attempts: 3 } });

describe('isS3Outage', () => {
  it('an answer of 5xx, or none because of the network, is an outage', () => {
    expect(isS3Outage(serviceError('ServiceUnavailable', 503))).toBe(true);
    expect(isS3Outage(serviceError('SlowDown', 503))).toBe(true);
    expect(isS3Outage(serviceError('InternalError', 500))).toBe(true);
    for (const code of [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'ENOTFOUND',
      'EAI_AGAIN',
      'EHOSTUNREACH',
    ]) {
      expect(isS3Outage(socketError(code)), code).toBe(true);
    }
    // @smithy/node-http-handler's connection and socket timeouts.
    expect(isS3Outage(Object.assign(new Error('timed out'), { name: 'TimeoutError' }))).toBe(true);
    // Node's connect to both addresses of "localhost", refused on each.
    expect(isS3Outage(new AggregateError([socketError('ECONNREFUSED'), socketError('ECONNREFUSED')]))).toBe(
      true,
    );
    expect(isS3Outage(new Error('wrapped', { cause: socketError('ECONNRESET') }))).toBe(true);
  });

  it('anything else is not: a 4xx, and errors with no status that are not the network', () => {
    expect(isS3Outage(serviceError('AccessDenied', 403))).toBe(false);
    expect(isS3Outage(serviceError('NoSuchBucket', 404))).toBe(false);
    // A status wins over a network-looking name: the store did answer.
    expect(isS3Outage(Object.assign(socketError('ECONNRESET'), { $metadata: { httpStatusCode: 400 } }))).toBe(
      false,
    );
    expect(
      isS3Outage(
        Object.assign(new Error('Could not load credentials'), { name: 'CredentialsProviderError' }),
      ),
    ).toBe(false);
    expect(isS3Outage(Object.assign(new Error('Unexpected end of XML'), { $metadata: {} }))).toBe(false);
    expect(isS3Outage(Object.assign(new Error('The operation was aborted'), { name: 'AbortError' }))).toBe(
      false,
    );
    expect(isS3Outage(new Error('client went away'))).toBe(false);
    expect(isS3Outage(undefined)).toBe(false);
    expect(isS3Outage('ECONNREFUSED')).toBe(false);
  });
});
