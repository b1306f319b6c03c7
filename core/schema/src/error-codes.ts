/**
 * Every error Compresso can report, with the HTTP status it maps to. This is the one table:
 * the server, the clients, the MCP tools and the WordPress plugin all read their codes from here.
 *
 * This file imports nothing: the Node client builds it into its own output (it has no runtime
 * dependency, zod included).
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
  /** The AI provider refused the prompt, instruction or image under its content policy. */
  CONTENT_POLICY_VIOLATION: 422,
  /** An edit instruction of which no word could be turned into an operation. */
  INSTRUCTION_NOT_UNDERSTOOD: 422,
  QUOTA_EXCEEDED: 429,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  /** No AI provider is set up for what was asked (generation, a generative edit). */
  PROVIDER_NOT_CONFIGURED: 501,
  SERVICE_UNAVAILABLE: 503,
  /** The AI provider failed or answered something that is not its documented contract. */
  PROVIDER_ERROR: 502,
  /** The AI provider asked us to slow down; Retry-After passes on its hint. */
  PROVIDER_RATE_LIMITED: 503,
  /** The AI provider did not answer within COMPRESSO_AI_TIMEOUT_MS. */
  PROVIDER_TIMEOUT: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/**
 * Codes a client reports when no answer of the server explains the failure (status undefined).
 * They never travel on the wire from the server; every client (Node, Python, PHP) uses these words
 * so a caller handles them alike in every language.
 */
export const CLIENT_ERROR_CODES = {
  CONNECTION_ERROR: 'No answer: the connection was refused, reset or dropped, or the name did not resolve.',
  TIMEOUT: 'No answer within the timeout.',
  ABORTED: "The caller's abort signal fired (Node).",
  MISSING_API_KEY: 'No API key was given and COMPRESSO_API_KEY is not set.',
  INVALID_INPUT: 'The input is not an image the client can send: no such file, a directory, an empty path.',
  INVALID_RESPONSE: 'The server answered something that is not the contract (not JSON, a header missing).',
  MISSING_DEPENDENCY: 'An optional package the client needs here is not installed (form-data on Node 16).',
  CLIENT_ERROR: 'A failure inside the client that fits no other code.',
} as const;

export type ClientErrorCode = keyof typeof CLIENT_ERROR_CODES;

export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);
}
