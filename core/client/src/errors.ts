import type { ClientErrorCode, ErrorCode } from '@compresso/schema/wire';
import type { CompressoErrorLike } from './types.ts';

export interface CompressoErrorInit {
  status?: number | undefined;
  requestId?: string | undefined;
  details?: unknown;
  cause?: unknown;
  /** Response headers of the failed answer (lower-case names), when there was one. */
  headers?: Record<string, string> | undefined;
}

/**
 * Base of every error the client throws. `code` is the server's stable code (`INVALID_API_KEY`,
 * `QUOTA_EXCEEDED`, … from @compresso/schema's table) or one of the client's own for failures
 * that never reached an answer (`CONNECTION_ERROR`, `TIMEOUT`, `ABORTED`, `MISSING_API_KEY`,
 * `INVALID_INPUT`). `status` is the HTTP status, undefined when there was no answer.
 */
export class CompressoError extends Error implements CompressoErrorLike {
  readonly code: string;
  readonly status: number | undefined;
  readonly requestId: string | undefined;
  readonly details: unknown;
  readonly headers: Record<string, string> | undefined;

  constructor(code: string, message: string, init: CompressoErrorInit = {}) {
    super(message);
    if (init.cause !== undefined) (this as { cause?: unknown }).cause = init.cause;
    this.name = new.target.name;
    this.code = code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
    this.headers = init.headers;
  }

  /** The server's wire shape, e.g. to pass an error on unchanged. */
  toJSON(): { error: { code: string; message: string; details?: unknown; request_id?: string } } {
    const error: { code: string; message: string; details?: unknown; request_id?: string } = {
      code: this.code,
      message: this.message,
    };
    if (this.details !== undefined) error.details = this.details;
    if (this.requestId !== undefined) error.request_id = this.requestId;
    return { error };
  }
}

/** 401: no key, a malformed key, an unknown or revoked key (`UNAUTHENTICATED`, `INVALID_API_KEY`). */
export class AuthenticationError extends CompressoError {}

/** 403: the account's plan does not include the API (`PLAN_REQUIRED`), or `FORBIDDEN`. */
export class PermissionError extends CompressoError {}

/** 400, 405, 409 (and `URL_FETCH_FAILED`, `IDEMPOTENCY_KEY_REUSED`): a bad option (`INVALID_OPTION`, with `details` naming the field), a bad request. */
export class BadRequestError extends CompressoError {}

/** 404: an unknown key id (or route). */
export class NotFoundError extends CompressoError {}

/** 413: the file is over the server's upload limit (`FILE_TOO_LARGE`), or over the client's. */
export class TooLargeError extends CompressoError {}

/**
 * 415 and 422: not an image, a format the server does not read, an empty, corrupt, too large (in
 * pixels), too animated or too slow image (`NOT_AN_IMAGE`, `CORRUPT_IMAGE`, `IMAGE_TOO_LARGE`, …).
 */
export class UnsupportedImageError extends CompressoError {}

/**
 * 429. `retryAfter` is the server's `Retry-After` in seconds; `resetAt` when the quota or limit
 * resets; `quotaExceeded` is true for the daily quota (`QUOTA_EXCEEDED`), which is never retried.
 */
export class RateLimitError extends CompressoError {
  readonly retryAfter: number | undefined;
  readonly resetAt: Date | undefined;
  readonly quotaExceeded: boolean;

  constructor(
    code: string,
    message: string,
    init: CompressoErrorInit & { retryAfter?: number | undefined; resetAt?: Date | undefined } = {},
  ) {
    super(code, message, init);
    this.retryAfter = init.retryAfter;
    this.resetAt = init.resetAt;
    this.quotaExceeded = code === 'QUOTA_EXCEEDED';
  }
}

/** 5xx: the server's fault or an outage (`INTERNAL_ERROR`, `SERVICE_UNAVAILABLE`, …). */
export class ServerError extends CompressoError {}

/** No answer: refused, reset or dropped connection, DNS failure (`CONNECTION_ERROR`). */
export class ConnectionError extends CompressoError {}

/** The attempt took longer than `timeout` (`TIMEOUT`), or the server's 408 (`REQUEST_TIMEOUT`). */
export class TimeoutError extends CompressoError {}

/** The caller's AbortSignal fired (`ABORTED`); `cause` is the signal's reason. */
export class AbortError extends CompressoError {}

/** Another name for PermissionError: a 403 here means the plan does not include the API. */
export { PermissionError as PlanError };

type ErrorClass = new (code: string, message: string, init?: CompressoErrorInit) => CompressoError;

/** Codes first (a code names the failure exactly); statuses only for codes this client does not know. */
export const BY_CODE: Record<ErrorCode, ErrorClass> & Record<string, ErrorClass | undefined> = {
  UNAUTHENTICATED: AuthenticationError,
  INVALID_API_KEY: AuthenticationError,
  PLAN_REQUIRED: PermissionError,
  FORBIDDEN: PermissionError,
  INVALID_OPTION: BadRequestError,
  INVALID_REQUEST: BadRequestError,
  MISSING_FILE: BadRequestError,
  URL_NOT_ALLOWED: BadRequestError,
  // 422 like the image failures, but the image never arrived: the request (its URL) is what to fix.
  URL_FETCH_FAILED: BadRequestError,
  METHOD_NOT_ALLOWED: BadRequestError,
  CONFLICT: BadRequestError,
  // 409: the first request with this Idempotency-Key is still running; retried (see retryDecision).
  IDEMPOTENCY_KEY_IN_USE: BadRequestError,
  // 422 like the image failures, but it is the request (a key reused for another one) to fix.
  IDEMPOTENCY_KEY_REUSED: BadRequestError,
  // 422: the prompt, instruction or image is what to change, not the image's bytes.
  CONTENT_POLICY_VIOLATION: BadRequestError,
  INSTRUCTION_NOT_UNDERSTOOD: BadRequestError,
  NOT_FOUND: NotFoundError,
  REQUEST_TIMEOUT: TimeoutError,
  FILE_TOO_LARGE: TooLargeError,
  NOT_AN_IMAGE: UnsupportedImageError,
  UNSUPPORTED_FORMAT: UnsupportedImageError,
  EMPTY_FILE: UnsupportedImageError,
  CORRUPT_IMAGE: UnsupportedImageError,
  IMAGE_TOO_LARGE: UnsupportedImageError,
  TOO_MANY_FRAMES: UnsupportedImageError,
  PROCESSING_TIMEOUT: UnsupportedImageError,
  QUOTA_EXCEEDED: RateLimitError,
  RATE_LIMITED: RateLimitError,
  INTERNAL_ERROR: ServerError,
  PROVIDER_NOT_CONFIGURED: ServerError,
  PROVIDER_ERROR: ServerError,
  // 503 with Retry-After: retried like SERVICE_UNAVAILABLE.
  PROVIDER_RATE_LIMITED: ServerError,
  PROVIDER_TIMEOUT: ServerError,
  SERVICE_UNAVAILABLE: ServerError,
};

/**
 * The class of each code the client reports itself (the contract's CLIENT_ERROR_CODES): one entry
 * per code of the table, so a code added there without a class here does not type-check.
 */
export const BY_CLIENT_CODE: Record<ClientErrorCode, ErrorClass> = {
  CONNECTION_ERROR: ConnectionError,
  TIMEOUT: TimeoutError,
  ABORTED: AbortError,
  MISSING_API_KEY: AuthenticationError,
  INVALID_INPUT: BadRequestError,
  INVALID_RESPONSE: CompressoError,
  MISSING_DEPENDENCY: CompressoError,
  CLIENT_ERROR: CompressoError,
};

function classOfStatus(status: number): ErrorClass {
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionError;
  if (status === 404) return NotFoundError;
  if (status === 408) return TimeoutError;
  if (status === 413) return TooLargeError;
  if (status === 415 || status === 422) return UnsupportedImageError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  return BadRequestError;
}

/** The error class a server code (preferred) or status maps to; exported for the contract test. */
export function errorClassFor(code: string | undefined, status: number): ErrorClass {
  return (code !== undefined ? BY_CODE[code] : undefined) ?? classOfStatus(status);
}

export const STATUS_CODES: Record<number, string> = {
  400: 'INVALID_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  408: 'REQUEST_TIMEOUT',
  409: 'CONFLICT',
  413: 'FILE_TOO_LARGE',
  415: 'UNSUPPORTED_FORMAT',
  422: 'CORRUPT_IMAGE',
  429: 'RATE_LIMITED',
  500: 'INTERNAL_ERROR',
  502: 'PROVIDER_ERROR',
  501: 'PROVIDER_NOT_CONFIGURED',
  503: 'SERVICE_UNAVAILABLE',
  504: 'PROVIDER_TIMEOUT',
};

/** Seconds from a `Retry-After` value: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, (date - now) / 1000);
}

/**
 * Build the typed error for a non-2xx answer. Bodies that are not ours (a proxy's HTML page, Node's
 * bare 408/431) still give a typed error, named after the status, with the start of the text.
 */
export function errorFromResponse(
  status: number,
  headers: Record<string, string>,
  body: Uint8Array,
): CompressoError {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  let code: string | undefined;
  let message: string | undefined;
  let details: unknown;
  let requestId: string | undefined = headers['x-request-id'];
  try {
    const parsed = JSON.parse(text) as {
      error?: { code?: unknown; message?: unknown; details?: unknown; request_id?: unknown };
    };
    const error = parsed?.error;
    if (error && typeof error === 'object') {
      if (typeof error.code === 'string') code = error.code;
      if (typeof error.message === 'string') message = error.message;
      details = error.details;
      if (typeof error.request_id === 'string' && error.request_id) requestId = error.request_id;
    }
  } catch {
    // Not our JSON: keep the status, show the start of the text.
  }
  const finalCode = code ?? STATUS_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'INVALID_REQUEST');
  const finalMessage =
    message ?? `HTTP ${status}${text.trim() ? `: ${text.trim().slice(0, 200)}` : ' without a body'}`;
  const Class = errorClassFor(code, status);
  const init = { status, requestId, details, headers };
  if (Class === RateLimitError) {
    const retryAfter = parseRetryAfter(headers['retry-after']);
    const resetSeconds =
      headers['ratelimit-reset'] !== undefined ? Number(headers['ratelimit-reset']) : undefined;
    const resetsAtDetail =
      details && typeof details === 'object' ? (details as { resets_at?: unknown }).resets_at : undefined;
    let resetAt: Date | undefined;
    if (typeof resetsAtDetail === 'string' && !Number.isNaN(Date.parse(resetsAtDetail))) {
      resetAt = new Date(resetsAtDetail);
    } else if (resetSeconds !== undefined && Number.isFinite(resetSeconds)) {
      resetAt = new Date(Date.now() + resetSeconds * 1000);
    } else if (retryAfter !== undefined) {
      resetAt = new Date(Date.now() + retryAfter * 1000);
    }
    return new RateLimitError(finalCode, finalMessage, { ...init, retryAfter, resetAt });
  }
  return new Class(finalCode, finalMessage, init);
}
