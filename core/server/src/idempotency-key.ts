import type { IncomingMessage } from 'node:http';
import { CompressoError } from '@compresso/schema';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
/** Long enough for a UUID with a prefix or a hash, short enough to keep the index small. */
export const MAX_IDEMPOTENCY_KEY = 255;
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * The request's Idempotency-Key, or undefined when it has none. A malformed one (empty, too long,
 * spaces or non-ASCII, sent twice) is a 400 naming the header rather than a key silently ignored:
 * a client that believes its retries are safe must not find out otherwise from its quota.
 */
export function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  const raw = req.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? raw.join(',') : raw;
  if (value.length > 0 && value.length <= MAX_IDEMPOTENCY_KEY && VISIBLE_ASCII.test(value)) return value;
  throw new CompressoError(
    'INVALID_REQUEST',
    `${IDEMPOTENCY_HEADER}: expected 1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters (a UUID, say), received ${JSON.stringify(value.slice(0, 40))}${value.length > 40 ? '…' : ''}.`,
    {
      details: [
        {
          field: IDEMPOTENCY_HEADER,
          expected: `1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters`,
          received: value.slice(0, 100),
        },
      ],
    },
  );
}
