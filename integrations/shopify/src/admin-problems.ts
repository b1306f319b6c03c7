import type { Response } from 'express';
import type { z } from 'zod';

/**
 * The embedded admin API's answer to a body that does not parse, shared by its routers: 400
 * `INVALID_REQUEST` with each problem's field, what it expects and what it received.
 */
export function problems(error: z.ZodError, body: unknown) {
  return error.issues.map((issue) => ({
    field: issue.path.join('.') || '(body)',
    expected: issue.message,
    received:
      JSON.stringify(
        issue.path.reduce<unknown>(
          (v, k) => (v && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined),
          body,
        ),
      ) ?? 'nothing',
  }));
}

export function badRequest(res: Response, message: string, details: unknown) {
  res.status(400).json({ error: { code: 'INVALID_REQUEST', message, details } });
}
