import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  AbortError,
  Compresso,
  ConnectionError,
  RateLimitError,
  ServerError,
  TimeoutError,
} from './index.ts';
import { PHOTO, rejection } from './test-support.ts';

/**
 * A loopback stand-in for the faults the real server will not produce on demand: resets, 503s,
 * hangs. Each request takes the next scripted step; answers follow the real server's contract.
 */
type Step =
  | 'reset'
  | 'hang'
  | 'ok'
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string;
      error?: { code: string; message: string };
    };

let server: Server;
let url: string;
let script: Step[] = [];
let received: { method: string; path: string; body: Buffer }[] = [];

const OK_HEADERS = {
  'content-type': 'image/jpeg',
  'content-disposition': 'attachment; filename="photo.jpg"',
  'x-input-size': '1000',
  'x-output-size': '4',
  'x-savings-percent': '99.6',
  'x-width': '10',
  'x-height': '20',
  'x-input-width': '10',
  'x-input-height': '20',
  'x-input-format': 'jpeg',
  'x-output-format': 'jpeg',
  'x-quality': '80',
  'x-auto-quality': 'false',
  'x-optimized': 'true',
  'x-metadata-stripped': 'true',
  'x-request-id': 'fake-request',
};

function answer(step: Step, req: IncomingMessage, res: ServerResponse): void {
  if (step === 'reset') {
    req.socket.destroy();
    return;
  }
  if (step === 'hang') return;
  if (step === 'ok') {
    if (req.url === '/api/v1/usage') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          plan: 'pro',
          day: '2026-11-22',
          used: 1,
          limit: 500,
          remaining: 499,
          resets_at: '2026-11-23T00:00:00.000Z',
          resets_in_seconds: 60,
        }),
      );
      return;
    }
    if (req.url?.startsWith('/api/v1/key')) {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'k1',
          name: 'n',
          prefix: 'cmp_live_abcdefgh',
          created_at: '2026-11-22T00:00:00.000Z',
          last_used_at: null,
          revoked_at: null,
          key: 'cmp_live_secret',
        }),
      );
      return;
    }
    res.writeHead(200, OK_HEADERS);
    res.end(Buffer.from([1, 2, 3, 4]));
    return;
  }
  const body =
    step.body ??
    (step.error ? JSON.stringify({ error: { ...step.error, request_id: 'fake-request' } }) : undefined);
  res.writeHead(step.status, { 'content-type': 'application/json', ...step.headers });
  res.end(body);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        path: req.url ?? '',
        body: Buffer.concat(chunks),
      });
      answer(script.shift() ?? 'ok', req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  script = [];
  received = [];
});

/**
 * Records the delays the client's own code (core/client/src, not node:http's keep-alive timers) hands
 * to setTimeout: its pauses between attempts and each attempt's timer. What the client chose to wait
 * is asserted exactly, instead of timing the call (a stopwatch measured the machine's load as much as
 * the retry policy).
 */
function recordClientTimers(): { delays: number[]; restore: () => void } {
  const original = globalThis.setTimeout;
  const delays: number[] = [];
  const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((
    ...args: Parameters<typeof setTimeout>
  ) => {
    if (new Error().stack?.includes('/core/client/src/client.ts')) delays.push(Number(args[1]));
    return original(...args);
  }) as typeof setTimeout);
  return { delays, restore: () => spy.mockRestore() };
}

async function timerDelays<T>(call: () => Promise<T>): Promise<{ result: T; delays: number[] }> {
  const timers = recordClientTimers();
  try {
    return { result: await call(), delays: timers.delays };
  } finally {
    timers.restore();
  }
}

function client(options: ConstructorParameters<typeof Compresso>[1] = {}): Compresso {
  return new Compresso('cmp_live_test', { baseUrl: url, ...options });
}

describe('retries', () => {
  it('a reset connection is retried and then succeeds, with the same bytes sent each time', async () => {
    script = ['reset', 'reset', 'ok'];
    const result = await client().compress(PHOTO, { output: false, quality: 60 });
    expect(result.data).toEqual(Buffer.from([1, 2, 3, 4]));
    expect(received).toHaveLength(3);
    const photo = readFileSync(PHOTO);
    for (const attempt of received) {
      expect(attempt.body.includes(photo)).toBe(true);
      expect(attempt.body.toString('latin1')).toContain('name="quality"');
    }
    // Each attempt builds its own multipart boundary; everything else is the same.
    expect(received[0]!.body.length).toBe(received[2]!.body.length);
  });

  it('503 with Retry-After: waits that long, then succeeds', async () => {
    script = [
      {
        status: 503,
        headers: { 'retry-after': '1' },
        error: { code: 'SERVICE_UNAVAILABLE', message: 'over the memory budget' },
      },
      'ok',
    ];
    const { result, delays } = await timerDelays(() => client().compress(readFileSync(PHOTO)));
    expect(result.outputSize).toBe(4);
    expect(received).toHaveLength(2);
    // Two attempts with their 120 s timers, and the second second-long pause between them.
    expect(delays).toEqual([120_000, 1000, 120_000]);
  });

  it('429 RATE_LIMITED with Retry-After is retried; 429 QUOTA_EXCEEDED never is', async () => {
    script = [
      { status: 429, headers: { 'retry-after': '0' }, error: { code: 'RATE_LIMITED', message: 'slow down' } },
      'ok',
    ];
    expect((await client().usage()).remaining).toBe(499);
    expect(received).toHaveLength(2);

    received = [];
    script = [
      {
        status: 429,
        headers: { 'retry-after': '0', 'ratelimit-reset': '3600' },
        error: { code: 'QUOTA_EXCEEDED', message: 'daily quota used up' },
      },
      'ok',
    ];
    // resetAt is the client's clock plus RateLimit-Reset: on a frozen Date it is exact.
    const now = new Date('2026-11-22T10:00:00.000Z');
    vi.useFakeTimers({ toFake: ['Date'], now });
    let error: RateLimitError;
    try {
      error = (await rejection(client({ maxRetries: 5 }).info(PHOTO))) as RateLimitError;
    } finally {
      vi.useRealTimers();
    }
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.quotaExceeded).toBe(true);
    expect(error.retryAfter).toBe(0);
    expect(error.resetAt).toEqual(new Date(now.getTime() + 3_600_000));
    expect(received).toHaveLength(1);
  });

  it('a 429 without Retry-After, or marked X-Should-Retry: false, is not retried', async () => {
    script = [{ status: 429, error: { code: 'RATE_LIMITED', message: 'slow down' } }];
    expect(await rejection(client().usage())).toBeInstanceOf(RateLimitError);
    expect(received).toHaveLength(1);
    received = [];
    script = [
      {
        status: 503,
        headers: { 'x-should-retry': 'false' },
        error: { code: 'SERVICE_UNAVAILABLE', message: 'down' },
      },
    ];
    expect(await rejection(client().usage())).toBeInstanceOf(ServerError);
    expect(received).toHaveLength(1);
  });

  it('5xx is retried maxRetries times, then thrown as ServerError with the code', async () => {
    const failure: Step = { status: 500, error: { code: 'INTERNAL_ERROR', message: 'bug' } };
    script = [failure, failure, failure, 'ok'];
    const error = await rejection(client({ maxRetries: 2 }).usage());
    expect(error).toBeInstanceOf(ServerError);
    expect(error.code).toBe('INTERNAL_ERROR');
    expect(error.requestId).toBe('fake-request');
    expect(received).toHaveLength(3);
  });

  it("a body that is not ours (a proxy's HTML 502) is still a typed ServerError", async () => {
    script = [{ status: 502, headers: { 'content-type': 'text/html' }, body: '<html>Bad gateway</html>' }];
    const error = await rejection(client({ maxRetries: 0 }).usage());
    expect(error).toBeInstanceOf(ServerError);
    expect(error.status).toBe(502);
    expect(error.message).toContain('Bad gateway');
  });

  it("Node's bare 408 is a TimeoutError and retried", async () => {
    script = [{ status: 408, body: '' }, 'ok'];
    expect((await client().usage()).plan).toBe('pro');
    expect(received).toHaveLength(2);
    script = [{ status: 408, body: '' }];
    const error = await rejection(client({ maxRetries: 0 }).usage());
    expect(error).toBeInstanceOf(TimeoutError);
    expect([error.code, error.status]).toEqual(['REQUEST_TIMEOUT', 408]);
  });

  it('a Retry-After longer than maxRetryAfter is given back at once', async () => {
    script = [
      {
        status: 503,
        headers: { 'retry-after': '120' },
        error: { code: 'SERVICE_UNAVAILABLE', message: 'later' },
      },
    ];
    const { result: error, delays } = await timerDelays(() =>
      rejection(client({ maxRetryAfter: 60 }).usage()),
    );
    // One attempt's timer and no pause: given back at once, not after waiting.
    expect(delays).toEqual([120_000]);
    expect(error.code).toBe('SERVICE_UNAVAILABLE');
    expect(error.headers?.['retry-after']).toBe('120');
    expect(received).toHaveLength(1);
  });

  it('keys.create is not repeated after a lost connection (it may have created a key)', async () => {
    script = ['reset', 'ok'];
    const error = await rejection(client().keys.create({ name: 'x' }));
    expect(error).toBeInstanceOf(ConnectionError);
    expect(received).toHaveLength(1);
    // A 503 proves nothing was done: that one is retried.
    received = [];
    script = [
      { status: 503, headers: { 'retry-after': '0' }, error: { code: 'SERVICE_UNAVAILABLE', message: 'x' } },
      'ok',
    ];
    const created = await client().keys.create({ name: 'x' });
    expect(created).toMatchObject({
      id: 'k1',
      key: 'cmp_live_secret',
      createdAt: '2026-11-22T00:00:00.000Z',
    });
    expect(received).toHaveLength(2);
    expect(JSON.parse(received[1]!.body.toString())).toEqual({ name: 'x' });
  });
});

describe('timeouts, aborts and refused connections', () => {
  it('an answer slower than timeout is a TimeoutError, after the retries', async () => {
    script = ['hang', 'hang'];
    const { result: error, delays } = await timerDelays(() =>
      rejection(client({ timeout: 300, maxRetries: 1 }).usage()),
    );
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error.code).toBe('TIMEOUT');
    // The address waited on: a wrong COMPRESSO_BASE_URL is otherwise invisible.
    expect(error.message).toBe(`No complete answer from ${url} within 300 ms (GET /api/v1/usage).`);
    expect(received).toHaveLength(2);
    // Each attempt ran on its own 300 ms timer, with a backoff between them (was: ≥ 600 ms elapsed).
    // The backoff is jittered over 250–500 ms, so it can itself be 300: timers are matched by place,
    // not by counting 300s (which failed one run in ~250).
    expect(delays).toHaveLength(3);
    expect([delays[0], delays[2]]).toEqual([300, 300]);
    expect(delays[1]).toBeGreaterThanOrEqual(250);
    expect(delays[1]).toBeLessThanOrEqual(500);
  });

  it('the per-call timeout overrides the client default', async () => {
    script = ['hang'];
    const error = await rejection(client({ timeout: 60_000 }).usage({ timeout: 200, maxRetries: 0 }));
    expect(error).toBeInstanceOf(TimeoutError);
  });

  it('an AbortSignal ends the call at once, during a request or while waiting to retry, and is never retried', async () => {
    script = ['hang', 'ok'];
    const controller = new AbortController();
    const call = rejection(client({ maxRetries: 3 }).info(PHOTO, { signal: controller.signal }));
    // Aborted once the server holds the whole request (not after a fixed pause a loaded machine may
    // outlast while the upload is still going out).
    await vi.waitFor(() => expect(received).toHaveLength(1), { timeout: 10_000, interval: 10 });
    controller.abort(new Error('user gave up'));
    const during = await call;
    // ABORTED, not TIMEOUT: the abort ended the attempt, the server still holding it (it never answers).
    expect(during).toBeInstanceOf(AbortError);
    expect(during.code).toBe('ABORTED');
    expect(received).toHaveLength(1);

    received = [];
    script = [
      { status: 503, headers: { 'retry-after': '30' }, error: { code: 'SERVICE_UNAVAILABLE', message: 'x' } },
    ];
    const waiting = new AbortController();
    const timers = recordClientTimers();
    let whileWaiting: Awaited<ReturnType<typeof rejection>>;
    try {
      const pending = rejection(client().usage({ signal: waiting.signal }));
      // Aborted once the client is in its 30 s Retry-After pause (not after a fixed 200 ms).
      await vi.waitFor(() => expect(timers.delays).toContain(30_000), {
        timeout: 10_000,
        interval: 10,
      });
      waiting.abort();
      whileWaiting = await pending;
    } finally {
      timers.restore();
    }
    // Ended by the abort, during the pause: no second request was made.
    expect(whileWaiting).toBeInstanceOf(AbortError);
    expect(whileWaiting.message).toBe('The request was aborted while waiting to retry.');
    expect(received).toHaveLength(1);

    const already = new AbortController();
    already.abort();
    expect(await rejection(client().usage({ signal: already.signal }))).toBeInstanceOf(AbortError);
  });

  it('a refused connection is a ConnectionError naming the address tried and ECONNREFUSED, after the retries', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    // A trailing slash and the API root are accepted as the base; the message names the base as used.
    const error = await rejection(
      new Compresso('k', { baseUrl: `http://127.0.0.1:${port}/api/v1/`, maxRetries: 1 }).usage(),
    );
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error.code).toBe('CONNECTION_ERROR');
    expect(error.message).toBe(
      `Could not reach the Compresso server at http://127.0.0.1:${port} (GET /api/v1/usage: ECONNREFUSED).`,
    );
    expect(error.details).toEqual({ code: 'ECONNREFUSED' });
    expect(error.status).toBeUndefined();
  });
});
