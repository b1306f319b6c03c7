/**
 * The one error an adapter throws for a platform's refusal or failure, so the kit can decide what to
 * do without knowing the platform: retry later (`retryable`), or record the failure and go on.
 */
export type PlatformErrorCode =
  /** The asset (or site) is gone: not retried. */
  | 'NOT_FOUND'
  /** The platform's rate or cost limit: retried after `retryAfterMs` (never counted as a failure). */
  | 'THROTTLED'
  /** The platform could not be reached or answered 5xx: retried with backoff. */
  | 'UNAVAILABLE'
  /** The platform refused the file (Shopify: the file went FAILED): not retried; the old file stays. */
  | 'REJECTED'
  /** The site's access is gone (uninstalled, token revoked): not retried. */
  | 'UNAUTHORIZED'
  /** A request the platform does not take (another content type, alt text too long, a bad cursor). */
  | 'INVALID';

const RETRYABLE: ReadonlySet<PlatformErrorCode> = new Set(['THROTTLED', 'UNAVAILABLE']);

export class PlatformError extends Error {
  readonly code: PlatformErrorCode;
  /** Whether the same call may succeed later. THROTTLED and UNAVAILABLE are; the rest are not. */
  readonly retryable: boolean;
  /** How long the platform asked to wait, when it said. */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: PlatformErrorCode,
    message: string,
    init: { retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'PlatformError';
    this.code = code;
    this.retryable = RETRYABLE.has(code);
    this.retryAfterMs = init.retryAfterMs;
  }
}

export function isPlatformError(error: unknown): error is PlatformError {
  return error instanceof PlatformError;
}
