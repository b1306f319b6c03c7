import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { proAccount, startTestServer, type TestServer } from './testing.ts';

/**
 * An upload refused before its body is read (bad key, plan, quota, declared size) is answered at once
 * and the connection closed (closeAfterResponse in errors.ts). The client is usually still sending
 * then. A server that destroys the socket right after answering turns those bytes into a RST, and a
 * real client (undici's fetch, in another process) then often loses the answer it had not read yet:
 * EPIPE in place of 401/413/429, and a retry of a refused request. So the server keeps reading and
 * dropping after its answer until the client closes, 2 s at most (a timer these tests watch). These tests play that client on a raw
 * socket, step by step, so the order is fixed rather than left to two processes racing.
 */
const PHOTO = join(import.meta.dirname, '../../../../shared/corpus/photo-skimage-rocket.jpg');
const LIMIT = 1024 * 1024;

let srv: TestServer;
let key: string;

/**
 * The server's 2 s linger timer (closeAfterResponse in errors.ts), watched: when it is armed and whether
 * it fired. Who ended a connection — the client closing, or the server cutting off a stalled one — is
 * then asserted as an outcome, not read off a stopwatch that a loaded machine stretches.
 */
const linger = { delays: [] as number[], armed: 0, fired: 0 };

beforeAll(async () => {
  const original = globalThis.setTimeout;
  vi.spyOn(globalThis, 'setTimeout').mockImplementation(((...args: Parameters<typeof setTimeout>) => {
    const [handler, ms, ...rest] = args;
    if (typeof handler === 'function' && new Error().stack?.includes('/core/server/src/errors.ts')) {
      linger.delays.push(Number(ms));
      linger.armed++;
      return original(
        (...a: unknown[]) => {
          linger.fired++;
          (handler as (...b: unknown[]) => void)(...a);
        },
        ms,
        ...rest,
      );
    }
    return original(...args);
  }) as typeof setTimeout);
  srv = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: LIMIT } });
  ({ key } = await proAccount(srv.db, 'early@example.com'));
});
afterAll(async () => {
  await srv?.close();
  vi.restoreAllMocks();
});

interface Exchange {
  answer: string;
  /** The socket error the client saw, if any (EPIPE, ECONNRESET). */
  error: string | undefined;
  /** The server closed its side (FIN) after answering. */
  serverEnded: boolean;
  /** Once the answer was out and the linger timer armed, the server still held the connection. */
  openAfterAnswer: boolean;
  /** The server's linger timer fired: the server, not the client, ended the connection. */
  cutByServer: boolean;
}

/**
 * POST /api/v1/compress with a real photo in a multipart body, padded to `size` bytes: headers and the
 * first 16 KB, then wait for the whole answer, then (unless `stall`) the rest of the body.
 */
async function upload(size: number, apiKey: string, stall = false): Promise<Exchange> {
  const boundary = 'early-answer-boundary';
  const photo = readFileSync(PHOTO);
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="rocket.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const body = Buffer.concat([
    head,
    photo,
    Buffer.alloc(size - head.length - photo.length - tail.length),
    tail,
  ]);
  const { port } = new URL(srv.url);
  // Half-open allowed, as an HTTP client is: the server's FIN after its answer does not end our side,
  // so the rest of the body still goes out (or, with `stall`, never does).
  const socket: Socket = connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  let answer = '';
  let error: string | undefined;
  let serverEnded = false;
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  socket.on('end', () => {
    serverEnded = true;
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const answered = new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      const split = answer.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(answer)?.[1] ?? Number.NaN);
      if (split >= 0 && answer.length - split - 4 >= length) {
        resolve();
      }
    });
  });
  socket.write(
    [
      'POST /api/v1/compress HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      `Authorization: Bearer ${apiKey}`,
      `Content-Type: multipart/form-data; boundary=${boundary}`,
      `Content-Length: ${body.length}`,
      '',
      '',
    ].join('\r\n'),
  );
  const armedBefore = linger.armed;
  const firedBefore = linger.fired;
  socket.write(body.subarray(0, 16 * 1024));
  await answered;
  // The answer is out ('finish' armed the linger timer): a server that destroyed the socket with the
  // answer would have dropped it by now (was: a fixed 200 ms pause).
  await vi.waitFor(() => expect(linger.armed).toBe(armedBefore + 1), { timeout: 10_000, interval: 5 });
  const openAfterAnswer = (await connections()) === 1;
  if (stall) {
    await vi.waitFor(async () => expect(await connections()).toBe(0), { timeout: 20_000, interval: 20 });
    socket.destroy();
    await closed;
  } else {
    // The rest of the body, then our FIN; the socket closes by itself once both sides are done (or on
    // a reset, which `error` records).
    socket.end(body.subarray(16 * 1024));
    await closed;
  }
  return { answer, error, serverEnded, openAfterAnswer, cutByServer: linger.fired > firedBefore };
}

function connections(): Promise<number> {
  return new Promise((resolve, reject) =>
    srv.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );
}

function statusAndCode(answer: string): [number, string] {
  const status = Number(answer.slice(9, 12));
  const json = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
  return [status, json.error.code];
}

describe('an early answer survives the rest of the upload', () => {
  it('401 INVALID_API_KEY: the client sends the rest of its body without a reset, then both sides close', async () => {
    const result = await upload(400 * 1024, 'cmp_live_not-a-key-at-all-but-of-the-right-length-000000');
    expect(statusAndCode(result.answer)).toEqual([401, 'INVALID_API_KEY']);
    expect(result.answer).toMatch(/\r\nconnection: close\r\n/i);
    // Closed because the client finished, not cut off by the server's timer (was: within 1.5 s).
    expect(result).toMatchObject({
      openAfterAnswer: true,
      error: undefined,
      serverEnded: true,
      cutByServer: false,
    });
  });

  it('413 FILE_TOO_LARGE (declared over the limit): the same', async () => {
    const result = await upload(LIMIT + 200 * 1024, key);
    expect(statusAndCode(result.answer)).toEqual([413, 'FILE_TOO_LARGE']);
    expect(result).toMatchObject({ openAfterAnswer: true, error: undefined, serverEnded: true });
  });

  it('a client that stops sending is still cut off, by the 2 s timer armed with the answer', async () => {
    const result = await upload(400 * 1024, 'cmp_live_not-a-key-at-all-but-of-the-right-length-000000', true);
    expect(statusAndCode(result.answer)[0]).toBe(401);
    // The server ended it, with its linger timer of 2 s (was: gone between 1.5 and 4 s of wall clock).
    expect(result).toMatchObject({
      openAfterAnswer: true,
      error: undefined,
      serverEnded: true,
      cutByServer: true,
    });
    expect(linger.delays.every((ms) => ms === 2000)).toBe(true);
  });
});
