import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** What every error handed to an assistant carries, in the server's wire shape plus retry facts. */
export interface ToolErrorBody {
  code: string;
  message: string;
  status?: number;
  request_id?: string;
  details?: unknown;
  /** Seconds the server asked to wait (Retry-After), for rate limits and the daily quota. */
  retry_after_seconds?: number;
  /** When the quota or limit resets (ISO 8601, UTC). */
  resets_at?: string;
  /** What the user can do about it. */
  hint?: string;
}

interface ErrorLike {
  code?: unknown;
  message?: unknown;
  status?: unknown;
  requestId?: unknown;
  details?: unknown;
  retryAfter?: unknown;
  resetAt?: unknown;
}

export const KEY_ENV = 'COMPRESSO_API_KEY';
export const BASE_URL_ENV = 'COMPRESSO_BASE_URL';

/** The steps for a missing or refused key: where keys come from and where this server reads one. */
export function setupSteps(baseUrl: string): string {
  return [
    'How to set up Compresso for this assistant:',
    `1. Get an API key for an account on a plan that includes the API (Pro). On the Compresso server you use (${baseUrl}), its operator creates one with \`compresso keys create --account you@example.com --name assistant\` (the key is printed once); with a key you already have, POST ${baseUrl}/api/v1/key makes another.`,
    `2. Put it in the environment of compresso-mcp: in your MCP client's configuration, under this server's "env", set "${KEY_ENV}": "cmp_live_…" — and "${BASE_URL_ENV}" when the server is not http://localhost:3000.`,
    '3. Restart the MCP client (or reload its MCP servers) so compresso-mcp starts again with the key.',
  ].join('\n');
}

function hintFor(code: string, baseUrl: string): string | undefined {
  switch (code) {
    case 'MISSING_API_KEY':
    case 'UNAUTHENTICATED':
    case 'INVALID_API_KEY':
      return setupSteps(baseUrl);
    case 'PLAN_REQUIRED':
      return 'The account behind this key is not on a plan that includes the API. Activate Pro (a promo code or a subscription), then try again; the key stays the same.';
    case 'QUOTA_EXCEEDED':
      return 'The daily quota is used up and resets at 00:00 UTC. Retrying before then only fails again; get_usage shows the count.';
    case 'CONNECTION_ERROR':
    case 'TIMEOUT':
      return `No answer from ${baseUrl}. Check that the server runs and that ${BASE_URL_ENV} points at it.`;
    case 'FILE_TOO_LARGE':
      return 'Make the file smaller first (for example a lower resolution export), or ask the server operator for a larger upload limit.';
    default:
      return undefined;
  }
}

/** Any error (the client's typed errors, our own refusals, a bug) as plain facts. */
export function errorBody(error: unknown, baseUrl: string): ToolErrorBody {
  const e = (error && typeof error === 'object' ? error : {}) as ErrorLike;
  const code = typeof e.code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(e.code) ? e.code : 'INTERNAL_ERROR';
  const message =
    typeof e.message === 'string' && e.message
      ? e.message
      : error instanceof Error
        ? String(error)
        : String(error);
  const body: ToolErrorBody = { code, message };
  if (typeof e.status === 'number') body.status = e.status;
  if (typeof e.requestId === 'string') body.request_id = e.requestId;
  if (e.details !== undefined) body.details = e.details;
  if (typeof e.retryAfter === 'number' && Number.isFinite(e.retryAfter)) {
    body.retry_after_seconds = Math.ceil(e.retryAfter);
  }
  if (e.resetAt instanceof Date && !Number.isNaN(e.resetAt.getTime()))
    body.resets_at = e.resetAt.toISOString();
  const hint = hintFor(code, baseUrl);
  if (hint) body.hint = hint;
  return body;
}

/** One line a person can read first, then the facts. */
export function describeError(body: ToolErrorBody): string {
  const lines = [`${body.code}${body.status ? ` (HTTP ${body.status})` : ''}: ${body.message}`];
  if (body.retry_after_seconds !== undefined || body.resets_at !== undefined) {
    const after = body.retry_after_seconds !== undefined ? `${body.retry_after_seconds} s` : undefined;
    lines.push(
      `Retry after: ${[after, body.resets_at && `at ${body.resets_at}`].filter(Boolean).join(', ')}`,
    );
  }
  if (body.request_id) lines.push(`Request id: ${body.request_id}`);
  if (body.hint) lines.push('', body.hint);
  return lines.join('\n');
}

/**
 * A tool failure as MCP wants it: `isError` with text, never a protocol error, so the assistant sees
 * what went wrong and can tell the user. The second block is the same facts as JSON for programs;
 * there is no structuredContent because the tools' output schemas describe successes only.
 */
export function errorResult(error: unknown, baseUrl: string): CallToolResult {
  const body = errorBody(error, baseUrl);
  return {
    isError: true,
    content: [
      { type: 'text', text: describeError(body) },
      { type: 'text', text: JSON.stringify({ error: body }) },
    ],
  };
}
