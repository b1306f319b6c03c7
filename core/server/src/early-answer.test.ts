import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proAccount, startTestServer, type TestServer } from './test-helpers.ts';

/**
 * An upload refused before its body is read (bad key, plan, quota, declared size) is answered at once
 * and the connection closed (closeAfterResponse in errors.ts). The client is usually still sending
 * then. A server that destroys the socket right after answering turns those bytes into a RST, and a
 * real client (undici's fetch, in another process) then often loses the answer it had not read yet:
 * EPIPE in place of 401/413/429, and a retry of a refused request. So the server keeps reading and
 * dropping after its answer until the client closes, 2 s at most. These tests play that client on a raw
 * socket, step by step, so the order is fixed rather than left to two processes racing.
 */
const PHOTO = join(import.meta.dirname, '../../../../shared/corpus/photo-skimage-rocket.jpg');
const LIMIT = 1024 * 1024;

let srv: TestServer;
let key: string;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: LIMIT } });
  ({ key } = await proAccount(srv.db, 'early@example.com'));
});
afterAll(async () => {
  await srv?.close();
});

interface Exchange {
  answer: string;
  /** The socket error the client saw, if any (EPIPE, ECONNRESET). */
  error: string | undefined;
  /** The server closed its side (FIN) after answering. */
  serverEnded: boolean;
  /** 200 ms after the answer the server still held the connection, reading what we might still send. */
  openAfterAnswer: boolean;
  /** Milliseconds from the answer until the connection was gone (with `stall`: on the server's side). */
  heldForMs: number;
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
  let answeredAt = 0;
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
        answeredAt ||= Date.now();
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
  socket.write(body.subarray(0, 16 * 1024));
  await answered;
  await new Promise((resolve) => setTimeout(resolve, 200));
  const openAfterAnswer = (await connections()) === 1;
  let heldForMs: number;
  if (stall) {
    while ((await connections()) > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    heldForMs = Date.now() - answeredAt;
    socket.destroy();
    await closed;
  } else {
    // The rest of the body, then our FIN; the socket closes by itself once both sides are done (or on
    // a reset, which `error` records).
    socket.end(body.subarray(16 * 1024));
    await closed;
    heldForMs = Date.now() - answeredAt;
  }
  return { answer, error, serverEnded, openAfterAnswer, heldForMs };
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
    expect(result).toMatchObject({ openAfterAnswer: true, error: undefined, serverEnded: true });
    expect(result.heldForMs).toBeLessThan(1500);
  });

  it('413 FILE_TOO_LARGE (declared over the limit): the same', async () => {
    const result = await upload(LIMIT + 200 * 1024, key);
    expect(statusAndCode(result.answer)).toEqual([413, 'FILE_TOO_LARGE']);
    expect(result).toMatchObject({ openAfterAnswer: true, error: undefined, serverEnded: true });
  });

  it('a client that stops sending is still cut off, about 2 s after the answer', async () => {
    const result = await upload(400 * 1024, 'cmp_live_not-a-key-at-all-but-of-the-right-length-000000', true);
    expect(statusAndCode(result.answer)[0]).toBe(401);
    expect(result).toMatchObject({ openAfterAnswer: true, error: undefined, serverEnded: true });
    expect(result.heldForMs).toBeGreaterThan(1500);
    expect(result.heldForMs).toBeLessThan(4000);
  });
});
