import { crc32, deflateSync } from 'node:zlib';
import { createEngine } from '@compresso/engine';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer } from './testing.ts';

/**
 * Hostile and broken images over HTTP: each engine refusal arrives as its own 4xx with the schema's
 * code, a message, and a request id, and the server keeps answering afterwards.
 */

function chunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A valid PNG header declaring 50000×50000 pixels, a few hundred bytes long: a decompression bomb. */
function pngBomb(): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(50_000, 0);
  ihdr.writeUInt32BE(50_000, 4);
  ihdr.set([1, 0, 0, 0, 0], 8); // 1-bit greyscale, deflate, adaptive filter, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.alloc(64 * 1024))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

async function manyFrameGif(frames: number): Promise<Buffer> {
  const height = 4;
  const pixels = Buffer.alloc(4 * height * frames * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 37) % 256;
  return sharp(pixels, { raw: { width: 4, height: height * frames, channels: 3, pageHeight: height } })
    .gif()
    .toBuffer();
}

let srv: TestServer;
let key: string;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 8 * 1024 * 1024 } });
  key = (await proAccount(srv.db, 'images@example.com')).key;
});
afterAll(() => srv.close());

async function send(
  file: Uint8Array,
  fields: Record<string, string> = {},
  name = 'upload.bin',
  url = srv.url,
) {
  const res = await fetch(`${url}/api/v1/compress`, {
    method: 'POST',
    headers: bearer(key),
    body: form(file, fields, name),
  });
  const body = (await res.json()) as { error: { code: string; message: string; request_id: string } };
  return { status: res.status, error: body.error };
}

describe('POST /api/v1/compress with hostile or broken images', () => {
  it.each([
    [
      'an SVG',
      () => Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'),
      415,
      'UNSUPPORTED_FORMAT',
    ],
    [
      'a text file named .jpg',
      () => Buffer.from('hello, this is not a photo\n'.repeat(20)),
      415,
      'NOT_AN_IMAGE',
    ],
    ['a truncated JPEG', async () => (await smallJpeg()).subarray(0, 400), 422, 'CORRUPT_IMAGE'],
    ['a 50000×50000 PNG bomb', async () => pngBomb(), 422, 'IMAGE_TOO_LARGE'],
    ['a GIF with 2000 frames', () => manyFrameGif(2000), 422, 'TOO_MANY_FRAMES'],
  ])('%s → %i %s', async (_name, make, status, code) => {
    const file = await make();
    const answer = await send(file);
    expect(answer.status).toBe(status);
    expect(answer.error.code).toBe(code);
    expect(answer.error.message).toMatch(/file/);
    expect(answer.error.request_id).toBeTruthy();
  });

  it('answers PROCESSING_TIMEOUT when an encode outlives the time limit, and keeps serving', async () => {
    const slow = await startTestServer({
      dbPath: ':memory:',
      overrides: { maxUploadBytes: 8 * 1024 * 1024 },
      engine: createEngine({ limits: { timeoutSeconds: 0.05, maxInputBytes: 8 * 1024 * 1024 } }),
    });
    try {
      const slowKey = (await proAccount(slow.db, 'slow@example.com')).key;
      const noise = Buffer.alloc(1500 * 1500 * 3);
      for (let i = 0; i < noise.length; i++) noise[i] = (i * 7919) % 251;
      const photo = await sharp(noise, { raw: { width: 1500, height: 1500, channels: 3 } })
        .jpeg({ quality: 60 })
        .toBuffer();
      const res = await fetch(`${slow.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(slowKey),
        body: form(photo, { output_format: 'avif' }),
      });
      const body = (await res.json()) as { error: { code: string } };
      expect(res.status).toBe(422);
      expect(body.error.code).toBe('PROCESSING_TIMEOUT');
      const health = await fetch(`${slow.url}/healthz`);
      expect(health.status).toBe(200);
    } finally {
      await slow.close();
    }
  });

  it('still compresses a good image after all of the above', async () => {
    const res = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg(), { output_format: 'webp' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/webp');
  });
});
