import { z } from 'zod';
import { ERROR_CODES, ERROR_STATUS, type ErrorCode } from './error-codes.ts';

export { ERROR_CODES, ERROR_STATUS, type ErrorCode, isErrorCode, statusOf } from './error-codes.ts';

export const ErrorCodeSchema = z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]);

/**
 * One problem with one field of a request. Every error that is about the request's fields
 * (INVALID_OPTION, INVALID_REQUEST, URL_NOT_ALLOWED, a web form's Origin) has a list of these as its
 * `details`: one shape the clients read with one function.
 */
export const FieldProblemSchema = z
  .object({
    field: z.string().describe('The request field, as sent (snake_case).'),
    expected: z.string().describe('What the field accepts.'),
    received: z.string().describe('What was received, shortened to 100 characters.'),
  })
  .describe('One invalid field.');
export type FieldProblem = z.infer<typeof FieldProblemSchema>;

/**
 * `details` is either the list of field problems, or, for an error about a limit rather than a
 * field (quota, upload size, a busy server, a job item's state), an object of facts about that limit
 * (`limit`, `resets_at`, `retry_after_seconds`, `status`, …) that clients read by name.
 */
export const ErrorDetailsSchema = z
  .union([z.array(FieldProblemSchema), z.record(z.string(), z.unknown())])
  .describe(
    'A list of FieldProblem when the request had bad fields; otherwise an object of facts about the limit that was hit.',
  );
export type ErrorDetails = z.infer<typeof ErrorDetailsSchema>;

function shorten(text: string): string {
  return text.length > 100 ? `${text.slice(0, 97)}...` : text;
}

/**
 * zod issues of a request body as FieldProblems: the field path as sent, what it accepts (zod's
 * message), what was received (shortened).
 */
export function fieldProblems(
  issues: readonly { path: readonly PropertyKey[]; message: string }[],
  body: unknown,
): FieldProblem[] {
  return issues.map((issue) => {
    let value: unknown = body;
    for (const key of issue.path) {
      value = value && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[key] : undefined;
    }
    let received: string;
    try {
      received = value === undefined ? 'nothing' : (JSON.stringify(value) ?? String(value));
    } catch {
      received = String(value);
    }
    const field = issue.path
      .map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i ? '.' : ''}${String(key)}`))
      .join('');
    return { field: field || '(body)', expected: issue.message, received: shorten(received) };
  });
}

export const ErrorBodySchema = z
  .object({
    error: z.object({
      code: ErrorCodeSchema,
      message: z.string(),
      details: ErrorDetailsSchema.optional(),
      request_id: z.string().optional(),
    }),
  })
  .describe('The body of every error answer.');
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export interface CompressoErrorInit {
  details?: ErrorDetails;
  requestId?: string;
  cause?: unknown;
}

/** The one error type. `status` always comes from ERROR_STATUS so code and status cannot disagree. */
export class CompressoError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: ErrorDetails;
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
