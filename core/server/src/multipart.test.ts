import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CompressoError, isCompressoError } from '@compresso/schema';
import { afterEach, describe, expect, it } from 'vitest';
import { readMultipart } from './multipart.ts';
import { createUploadBudget } from './upload-budget.ts';

/**
 * The one multipart reader, as both routes call it (`image`: compress/info/web; `batch`: jobs), on
 * a real HTTP server: what it refuses before reading, and what a client that goes away does to it.
 */
let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server whose only handler is the reader; each read's outcome is handed to the test. */
async function readerServer(kind: 'image' | 'batch', budget = createUploadBudget(10 * 1024 * 1024)) {
  const outcomes: Promise<unknown>[] = [];
  let announce: (() => void) | undefined;
  const started = new Promise<void>((resolve) => {
    announce = resolve;
  });
  server = createServer((req, res) => {
    const outcome = readMultipart(req, res, {
      kind,
      maxFileBytes: 1024 * 1024,
      maxBodyBytes: 4 * 1024 * 1024,
      maxFiles: kind === 'batch' ? 10 : 1,
      // Long: an abort must end the read by itself, not by the stall timer.
      idleTimeoutMs: 600_000,
      budget,
      owner: 'acct',
    });
    outcomes.push(outcome);
    announce?.();
    outcome.then(
      (read) => res.end(JSON.stringify({ files: read.files.length })),
      (error: CompressoError) =>
        res.writeHead(error.status).end(JSON.stringify({ code: error.code, message: error.message })),
    );
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { port: (server!.address() as AddressInfo).port, outcomes, started, budget };
}

describe.each(['image', 'batch'] as const)('readMultipart (%s)', (kind) => {
  it('refuses a body that is not multipart/form-data before reading it, naming the Content-Type', async () => {
    const { port } = await readerServer(kind);
    for (const type of ['text/plain', undefined, 'application/x-www-form-urlencoded']) {
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: type ? { 'content-type': type } : {},
        body: type ? 'file=x' : new Uint8Array([1, 2, 3]),
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe('INVALID_REQUEST');
      expect(body.message).toContain('multipart/form-data');
      // undici labels a bare byte body with no type at all.
      expect(body.message).toContain(type ? JSON.stringify(type) : 'Content-Type');
    }
    const noBoundary = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: { 'content-type': 'multipart/form-data' },
      body: 'x',
    });
    expect(noBoundary.status).toBe(400);
    expect(((await noBoundary.json()) as { message: string }).message).toMatch(
      /^Malformed multipart request/,
    );
  });

  it('a client that goes away mid-upload ends the read at once (not after the stall timer) and frees its budget', async () => {
    const budget = createUploadBudget(2 * 1024 * 1024);
    const { port, outcomes, started } = await readerServer(kind, budget);
    const boundary = 'abortboundary';
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      headers: {
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(1024 * 1024),
      },
    });
    req.on('error', () => {});
    req.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    );
    req.write(Buffer.alloc(64 * 1024, 1));
    await started;
    // The declared megabyte is held while the upload is in flight.
    expect(budget.reserved).toBe(1024 * 1024);
    req.destroy();
    const error = await outcomes[0]!.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isCompressoError(error)).toBe(true);
    expect((error as CompressoError).code).toBe('INVALID_REQUEST');
    expect((error as CompressoError).message).toBe('The client aborted the upload.');
    // Released with the answer's close, which follows the abort.
    await new Promise<void>((resolve) => {
      const check = () => (budget.reserved === 0 ? resolve() : setImmediate(check));
      check();
    });
    expect(budget.uploads).toBe(0);
  });
});
