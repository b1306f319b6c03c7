/**
 * A refusal found before any request is sent (a relative path, a missing file, the source as the
 * output). Codes come from @compresso/schema's table, so they read like the server's own.
 */
export class ToolError extends Error {
  readonly code: string;
  readonly details: unknown;

  constructor(code: string, message: string, init: { details?: unknown } = {}) {
    super(message);
    this.name = 'ToolError';
    this.code = code;
    this.details = init.details;
  }
}
