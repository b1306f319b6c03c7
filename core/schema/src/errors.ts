import { z } from 'zod';

/**
 * Every error Compresso can report, with the HTTP status it maps to. This is the one table:
 * the server, the clients, the MCP tools and the WordPress plugin all read their codes from here.
 */
export const ERROR_STATUS = {
  INVALID_OPTION: 400,
  INVALID_REQUEST: 400,
  MISSING_FILE: 400,
  URL_NOT_ALLOWED: 400,
  UNAUTHENTICATED: 401,
  INVALID_API_KEY: 401,
  PLAN_REQUIRED: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  CONFLICT: 409,
  /** A request with the same Idempotency-Key is still running (and did not finish within the wait). */
  IDEMPOTENCY_KEY_IN_USE: 409,
  FILE_TOO_LARGE: 413,
  UNSUPPORTED_FORMAT: 415,
  NOT_AN_IMAGE: 415,
  EMPTY_FILE: 422,
  CORRUPT_IMAGE: 422,
  IMAGE_TOO_LARGE: 422,
  TOO_MANY_FRAMES: 422,
  PROCESSING_TIMEOUT: 422,
  URL_FETCH_FAILED: 422,
  /** The Idempotency-Key was used within 24 h for a different request (route, file or options). */
  IDEMPOTENCY_KEY_REUSED: 422,
  QUOTA_EXCEEDED: 429,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  PROVIDER_NOT_CONFIGURED: 501,
  SERVICE_UNAVAILABLE: 503,
  PROVIDER_ERROR: 502,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

export const ErrorCodeSchema = z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]);

/** One problem with one field of a request; `details` of an INVALID_OPTION error is a list of these. */
export const FieldProblemSchema = z
  .object({
    field: z.string().describe('The request field, as sent (snake_case).'),
    expected: z.string().describe('What the field accepts.'),
    received: z.string().describe('What was received, shortened to 100 characters.'),
  })
  .describe('One invalid field.');
export type FieldProblem = z.infer<typeof FieldProblemSchema>;

export const ErrorBodySchema = z
  .object({
    error: z.object({
      code: ErrorCodeSchema,
      message: z.string(),
      details: z.unknown().optional(),
      request_id: z.string().optional(),
    }),
  })
  .describe('The body of every error answer.');
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);
}

export interface CompressoErrorInit {
  details?: unknown;
  requestId?: string;
  cause?: unknown;
}

/** The one error type. `status` always comes from ERROR_STATUS so code and status cannot disagree. */
export class CompressoError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: unknown;
  requestId?: string;

  constructor(code: ErrorCode, message: string, init: CompressoErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'CompressoError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    if (init.details !== undefined) this.details = init.details;
    if (init.requestId !== undefined) this.requestId = init.requestId;
  }

  toBody(): ErrorBody {
    const error: ErrorBody['error'] = { code: this.code, message: this.message };
    if (this.details !== undefined) error.details = this.details;
    if (this.requestId !== undefined) error.request_id = this.requestId;
    return { error };
  }
}

export function isCompressoError(value: unknown): value is CompressoError {
  return value instanceof CompressoError;
}
