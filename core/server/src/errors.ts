import type { Socket } from 'node:net';
import type { Logger } from '@compresso/runtime';
import { CompressoError, isCompressoError } from '@compresso/schema';
import type { ErrorRequestHandler, Request, Response } from 'express';

/**
 * Turn anything thrown into the one wire shape. A CompressoError is the client's problem and says
 * so; anything else is ours: the client sees a generic INTERNAL_ERROR with the request id, and the
 * cause goes to the log (never to the client, where a stack or SQL would leak internals).
 */
export function toCompressoError(error: unknown, logger: Logger, req: Request): CompressoError {
  if (isCompressoError(error)) return error;
  const e = error as { type?: string; status?: number; message?: string };
  // body-parser's errors carry a 4xx status and a type; they are the client's malformed JSON.
  if (e && typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
    const message =
      e.type === 'entity.parse.failed'
        ? 'The JSON body could not be parsed.'
        : e.type === 'entity.too.large'
          ? 'The JSON body is too large.'
          : (e.message ?? 'Invalid request.');
    return new CompressoError('INVALID_REQUEST', message);
  }
  logger.error({ err: error, request_id: requestIdOf(req), path: req.path }, 'unhandled error');
  return new CompressoError('INTERNAL_ERROR', 'Internal error. Quote the request id when reporting it.');
}

export function requestIdOf(req: Request): string {
  return (req as Request & { requestId?: string }).requestId ?? '';
}

export function sendError(res: Response, req: Request, error: CompressoError): void {
  error.requestId = requestIdOf(req);
  if (error.code === 'QUOTA_EXCEEDED' || error.code === 'RATE_LIMITED')
    res.setHeader('X-Should-Retry', 'false');
  res.status(error.status).json(error.toBody());
}

/**
 * When an error is answered before the request body was read to its end (too large, stalled, bad
 * part), the connection cannot be reused: close it once the answer is out, and bound how long the
 * rest of the body may keep draining.
 */
export function closeAfterResponse(req: Request, res: Response): void {
  if (req.complete) return;
  res.setHeader('Connection', 'close');
  // Node ends a `Connection: close` answer with socket.destroySoon(): FIN, then destroy() as soon as
  // the answer is written. The client is often still sending its upload; a socket destroyed with
  // unread bytes makes the kernel answer them with RST, and a client that had not read our answer yet
  // loses it (EPIPE/ECONNRESET in place of 401, 413 or 429 — and a retry of a refused request, the
  // daily quota's included). So close as HTTP servers do (a lingering close): FIN after the answer,
  // keep reading and dropping what still arrives until the client closes, for the time bounded below.
  req.socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
  };
  res.on('finish', () => {
    const timer = setTimeout(() => req.socket.destroy(), 2000);
    timer.unref();
    req.socket.once('close', () => clearTimeout(timer));
  });
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const compressoError = toCompressoError(error, logger, req);
    if (res.headersSent) {
      // Part of the answer is already on the wire; the only honest signal left is a cut connection.
      req.socket.destroy();
      return;
    }
    closeAfterResponse(req, res);
    sendError(res, req, compressoError);
  };
}
