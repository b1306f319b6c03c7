import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Answers whose `100 Continue` was held back (see createHttpServer). A client that sends
 * `Expect: 100-continue` (curl does for uploads over 1 KB) waits for it before sending the body, so a
 * request refused by authentication, plan, quota or declared size never uploads its bytes at all.
 */
const deferred = new WeakSet<ServerResponse>();

export function deferContinue(res: ServerResponse): void {
  deferred.add(res);
}

/** Call right before reading the body: sends the held-back `100 Continue`, once. */
export function sendContinue(_req: IncomingMessage, res: ServerResponse): void {
  if (!deferred.has(res)) return;
  deferred.delete(res);
  if (!res.headersSent) res.writeContinue();
}
