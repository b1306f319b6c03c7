import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createAccount, createApiKey } from '@compresso/runtime';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BadRequestError,
  Compresso,
  type CompressoError,
  createClient,
  NotFoundError,
  PermissionError,
  PlanError,
  RateLimitError,
  TooLargeError,
  UnsupportedImageError,
} from './index.ts';
import { BIG_PHOTO, PHOTO, PNG, rejection, truncated, workDir } from './test-support.ts';

let srv: TestServer;
let key: string;
let client: Compresso;
const work = workDir('client');

beforeAll(async () => {
  srv = await startTestServer({ dbPath: join(work.dir, 'server.sqlite') });
  ({ key } = await proAccount(srv.db, 'client@example.com'));
  client = new Compresso(key, { baseUrl: srv.url });
});
afterAll(async () => {
  await srv?.close();
  work.cleanup();
});

/** Requests the server logged for a path: proves how many attempts a call made. */
function requestsTo(path: string): number {
  return srv.logLines.filter((line) => line['msg'] === 'request' && line['path'] === path).length;
}

describe('construction', () => {
  it('needs a key: explicit, else COMPRESSO_API_KEY, else a clear error', () => {
    const error = (() => {
      try {
        new Compresso(undefined, { env: {} });
      } catch (e) {
        return e as CompressoError;
      }
    })();
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error?.code).toBe('MISSING_API_KEY');
    expect(error?.message).toContain('COMPRESSO_API_KEY');
    const fromEnv = new Compresso(undefined, {
      env: { COMPRESSO_API_KEY: 'cmp_live_x', COMPRESSO_BASE_URL: 'https://img.example.com/api/v1/' },
    });
    expect(fromEnv.baseUrl).toBe('https://img.example.com');
    // Explicit options win over the environment; the default is the server's default port.
    expect(
      new Compresso('k', { baseUrl: 'http://127.0.0.1:9', env: { COMPRESSO_BASE_URL: 'http://x' } }).baseUrl,
    ).toBe('http://127.0.0.1:9');
    expect(new Compresso('k', { env: {} }).baseUrl).toBe('http://localhost:3000');
    expect(createClient('k', { env: {} })).toBeInstanceOf(Compresso);
    expect(() => new Compresso('k', { baseUrl: 'ftp://x' })).toThrow(/baseUrl: expected an http\(s\) URL/);
    expect(() => new Compresso('k', { maxRetries: -1 })).toThrow(/maxRetries/);
  });
});

describe('compress', () => {
  it('a path: writes <name>.min.<ext> beside it, never the input, and reports the facts', async () => {
    const input = work.copy(PHOTO, 'rocket.jpg');
    const before = readFileSync(input);
    const meta = await sharp(input).metadata();
    const result = await client.compress(input, { format: 'webp', quality: 70 });
    expect(result.outputPath).toBe(join(work.dir, 'rocket.min.webp'));
    expect(readFileSync(result.outputPath!)).toEqual(result.data);
    expect(readFileSync(input)).toEqual(before);
    expect(result.format).toBe('webp');
    expect(result.contentType).toBe('image/webp');
    expect(result.filename).toBe('rocket.webp');
    expect(result.inputSize).toBe(before.length);
    expect(result.outputSize).toBe(result.data.length);
    expect(result.outputSize).toBeLessThan(result.inputSize);
    expect(result.savingsPercent).toBeCloseTo((1 - result.outputSize / result.inputSize) * 100, 0);
    expect([result.inputWidth, result.inputHeight]).toEqual([meta.width, meta.height]);
    expect([result.width, result.height]).toEqual([meta.width, meta.height]);
    expect(result.inputFormat).toBe('jpeg');
    expect(result.quality).toBe(70);
    expect(result.requestId).toMatch(/.+/);
    const written = await sharp(result.outputPath!).metadata();
    expect(written.format).toBe('webp');
  });

  it('maxDimension and stripExif reach the server; the same format keeps the extension, still beside the input', async () => {
    const input = work.copy(PHOTO, 'same.jpg');
    const result = await client.compress(input, { maxDimension: 100, stripExif: true });
    expect(result.outputPath).toBe(join(work.dir, 'same.min.jpg'));
    expect(Math.max(result.width, result.height)).toBe(100);
    expect(result.metadataStripped).toBe(true);
    expect((await sharp(result.data).metadata()).format).toBe('jpeg');
  });

  it('output: a file, a directory, false; the input itself only with overwrite', async () => {
    const input = work.copy(PHOTO, 'out.jpg');
    const file = join(work.dir, 'nested', 'deeper', 'chosen.avif');
    const toFile = await client.compress(input, { format: 'avif', maxDimension: 64, output: file });
    expect(toFile.outputPath).toBe(file);
    expect((await sharp(file).metadata()).format).toBe('heif');

    const toDir = await client.compress(input, {
      format: 'png',
      maxDimension: 64,
      output: `${work.dir}/dir/`,
    });
    expect(toDir.outputPath).toBe(join(work.dir, 'dir', 'out.png'));
    expect(existsSync(toDir.outputPath!)).toBe(true);

    const nothing = await client.compress(input, { maxDimension: 64, output: false });
    expect(nothing.outputPath).toBeNull();
    expect(nothing.data.length).toBe(nothing.outputSize);

    const size = statSync(input).size;
    const before = requestsTo('/api/v1/compress');
    const refused = await rejection(client.compress(input, { output: input }));
    expect(refused).toBeInstanceOf(BadRequestError);
    expect(refused.code).toBe('INVALID_OPTION');
    expect(refused.message).toContain('overwrite: true');
    // Refused before a request was spent on it.
    expect(requestsTo('/api/v1/compress')).toBe(before);
    expect(statSync(input).size).toBe(size);

    const replaced = await client.compress(input, { maxDimension: 64, output: input, overwrite: true });
    expect(replaced.outputPath).toBe(input);
    expect(statSync(input).size).toBe(replaced.outputSize);
  });

  it('every kind of input: Buffer, Uint8Array, ArrayBuffer, Blob, File, Node stream, web stream', async () => {
    const bytes = readFileSync(PHOTO);
    const inputs: [string, () => unknown][] = [
      ['Buffer', () => bytes],
      ['Uint8Array', () => new Uint8Array(bytes)],
      ['ArrayBuffer', () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)],
      ['Blob', () => new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' })],
      ['File', () => new File([new Uint8Array(bytes)], 'from-file.jpg', { type: 'image/jpeg' })],
      ['fs stream', () => createReadStream(PHOTO)],
      ['Readable', () => Readable.from([bytes.subarray(0, 5000), bytes.subarray(5000)])],
      ['web stream', () => Readable.toWeb(createReadStream(PHOTO))],
    ];
    const reference = await client.compress(bytes, { format: 'webp', output: false });
    for (const [name, make] of inputs) {
      const result = await client.compress(make() as Buffer, { format: 'webp' });
      expect(result.inputSize, name).toBe(bytes.length);
      // Same bytes in, same options: the same bytes out, whatever carried them.
      expect(result.data.equals(reference.data), name).toBe(true);
      // Only a path input has a place to write beside.
      expect(result.outputPath, name).toBeNull();
    }
    const named = await client.compress(new File([new Uint8Array(bytes)], 'holiday.jpg'), {
      format: 'webp',
      output: `${work.dir}/named/`,
    });
    expect(named.outputPath).toBe(join(work.dir, 'named', 'holiday.webp'));
    const streamed = await client.compress(createReadStream(PHOTO), { output: `${work.dir}/streamed/` });
    expect(streamed.filename).toBe('photo-skimage-rocket.jpg');
    expect(streamed.outputPath).toBe(join(work.dir, 'streamed', 'photo-skimage-rocket.jpg'));
  });

  it('gives the same bytes as a plain multipart POST (what curl sends) with the same options', async () => {
    const body = new FormData();
    body.append('output_format', 'webp');
    body.append('quality', '60');
    body.append('max_dimension', '300');
    body.append('file', new Blob([readFileSync(PHOTO)]), 'rocket.jpg');
    const plain = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body,
    });
    expect(plain.status).toBe(200);
    const viaClient = await client.compress(PHOTO, {
      format: 'webp',
      quality: 60,
      maxDimension: 300,
      output: false,
    });
    expect(viaClient.data.equals(Buffer.from(await plain.arrayBuffer()))).toBe(true);
    expect(viaClient.outputSize).toBe(Number(plain.headers.get('x-output-size')));
  });

  it('a fetch of your own is used, with the global FormData (no form-data package needed)', async () => {
    const seen: string[] = [];
    const own = new Compresso(key, {
      baseUrl: srv.url,
      fetch: (url, init) => {
        seen.push(
          `${init?.method} ${String(url)} ${init?.body instanceof FormData ? 'FormData' : typeof init?.body}`,
        );
        return fetch(url, init);
      },
    });
    const result = await own.compress(readFileSync(PHOTO), { maxDimension: 50 });
    expect(Math.max(result.width, result.height)).toBe(50);
    expect(seen).toEqual([`POST ${srv.url}/api/v1/compress FormData`]);
  });

  it('an input that is none of those is refused with a clear message', async () => {
    const error = await rejection(client.compress(42 as unknown as string));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/expected a file path.*received number/);
    const missing = await rejection(client.compress(join(work.dir, 'nope.jpg')));
    expect(missing.code).toBe('INVALID_INPUT');
    expect(missing.message).toContain('no file at');
  });

  it('a misspelt or snake_case option is refused, naming the camelCase one, before any request', async () => {
    const before = requestsTo('/api/v1/compress');
    const error = await rejection(
      client.compress(PHOTO, { max_dimension: 100, output_format: 'webp', colour: 'red' } as never),
    );
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.code).toBe('INVALID_OPTION');
    expect(error.message).toContain('max_dimension: expected maxDimension (camelCase)');
    expect(error.message).toContain('output_format: expected format (camelCase)');
    expect(error.details).toContainEqual(expect.objectContaining({ field: 'colour' }));
    expect(requestsTo('/api/v1/compress')).toBe(before);
    await expect(client.compressBatch([PHOTO], { output: 'x' } as never)).rejects.toThrow(
      /output: expected one of/,
    );
  });

  it('a stream over maxUploadBytes is stopped in the client, before any request', async () => {
    const small = new Compresso(key, { baseUrl: srv.url, maxUploadBytes: 10_000 });
    const before = requestsTo('/api/v1/compress');
    const error = await rejection(small.compress(createReadStream(PHOTO)));
    expect(error).toBeInstanceOf(TooLargeError);
    expect(error.code).toBe('FILE_TOO_LARGE');
    expect(error.status).toBeUndefined();
    expect(requestsTo('/api/v1/compress')).toBe(before);
  });
});

describe('info', () => {
  it("returns the server's JSON as it is and writes nothing", async () => {
    const input = work.copy(PNG, 'text.png');
    const info = await client.info(input, { format: 'webp', quality: 80, maxDimension: 200 });
    expect(info.input_size).toBe(statSync(input).size);
    expect(info.output_format).toBe('webp');
    expect(info.input_format).toBe('png');
    expect(Math.max(info.width, info.height)).toBeLessThanOrEqual(200);
    expect(typeof info.output_size).toBe('number');
    expect(typeof info.savings_percent).toBe('number');
    expect(existsSync(join(work.dir, 'text.min.webp'))).toBe(false);
  });
});

describe('keys and usage', () => {
  it('create, list, revoke; a revoked key then fails with INVALID_API_KEY; an unknown id is NotFoundError', async () => {
    const created = await client.keys.create({ name: 'ci' });
    expect(created.key).toMatch(/^cmp_live_/);
    expect(created.name).toBe('ci');
    expect(created.prefix).toBe(created.key.slice(0, created.prefix.length));
    expect(created.createdAt).toMatch(/^\d{4}-/);
    const listed = await client.keys.list();
    const mine = listed.find((k) => k.id === created.id);
    expect(mine).toMatchObject({ name: 'ci', prefix: created.prefix, revokedAt: null });
    expect(JSON.stringify(listed)).not.toContain(created.key);

    const second = new Compresso(created.key, { baseUrl: srv.url });
    expect((await second.usage()).plan).toBe('pro');
    expect(await client.keys.revoke(created.id)).toEqual({ id: created.id, revoked: true });
    const revoked = await rejection(second.usage());
    expect(revoked).toBeInstanceOf(AuthenticationError);
    expect(revoked.code).toBe('INVALID_API_KEY');
    expect(revoked.status).toBe(401);
    expect((await client.keys.list()).some((k) => k.id === created.id)).toBe(false);

    const unknown = await rejection(client.keys.revoke('no-such-key'));
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown.code).toBe('NOT_FOUND');
    expect(unknown.status).toBe(404);
    expect(unknown.requestId).toMatch(/.+/);
  });

  it('usage: the plan and the count, camelCase', async () => {
    const first = await client.usage();
    const second = await client.usage();
    expect(first.plan).toBe('pro');
    expect(first.limit).toBe(500);
    expect(second.used).toBe(first.used + 1);
    expect(second.remaining).toBe(first.limit - second.used);
    expect(Date.parse(first.resetsAt)).toBeGreaterThan(Date.now());
    expect(first.resetsInSeconds).toBeGreaterThan(0);
    expect(first.day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});

describe("the server's errors arrive as typed errors with its code", () => {
  it('401 for an unknown key, without retrying', async () => {
    const before = requestsTo('/api/v1/info');
    const error = await rejection(new Compresso('cmp_live_nope', { baseUrl: srv.url }).info(PHOTO));
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error.code).toBe('INVALID_API_KEY');
    expect(error.status).toBe(401);
    expect(requestsTo('/api/v1/info')).toBe(before + 1);
  });

  it('403 PLAN_REQUIRED for a free account (PermissionError, also exported as PlanError)', async () => {
    const account = await createAccount(srv.db, 'free@example.com');
    const { secret } = await createApiKey(srv.db, account.id, 'free');
    const error = await rejection(
      new Compresso(secret, { baseUrl: srv.url }).compress(PHOTO, { output: false }),
    );
    expect(error).toBeInstanceOf(PermissionError);
    expect(error).toBeInstanceOf(PlanError);
    expect(error.code).toBe('PLAN_REQUIRED');
    expect(error.status).toBe(403);
    expect(error.details).toMatchObject({ required: 'pro' });
  });

  it('400 INVALID_OPTION names the field', async () => {
    const error = await rejection(client.compress(PHOTO, { quality: 300, output: false }));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.code).toBe('INVALID_OPTION');
    expect(error.status).toBe(400);
    expect(error.message).toContain('quality');
    expect(error.details).toEqual([expect.objectContaining({ field: 'quality', received: '"300"' })]);
    const format = await rejection(client.info(PHOTO, { format: 'bmp' as 'png' }));
    expect(format.code).toBe('INVALID_OPTION');
  });

  it('415 NOT_AN_IMAGE for text, 422 CORRUPT_IMAGE for a truncated JPEG, 422 EMPTY_FILE', async () => {
    const text = await rejection(client.compress(Buffer.from('just some text, not an image\n'.repeat(20))));
    expect(text).toBeInstanceOf(UnsupportedImageError);
    expect(text.code).toBe('NOT_AN_IMAGE');
    expect(text.status).toBe(415);
    const cut = await rejection(client.compress(truncated(PHOTO), { filename: 'cut.jpg' }));
    expect(cut).toBeInstanceOf(UnsupportedImageError);
    expect(cut.code).toBe('CORRUPT_IMAGE');
    expect(cut.status).toBe(422);
    const empty = await rejection(client.info(Buffer.alloc(0)));
    expect(empty).toBeInstanceOf(UnsupportedImageError);
    expect([empty.code, empty.status]).toEqual(['EMPTY_FILE', 422]);
  });

  it('413 FILE_TOO_LARGE from the server (its limit is 1 MiB here)', async () => {
    expect(statSync(BIG_PHOTO).size).toBeGreaterThan(srv.config.maxUploadBytes);
    const error = await rejection(client.compress(BIG_PHOTO, { output: false }));
    expect(error).toBeInstanceOf(TooLargeError);
    expect(error.code).toBe('FILE_TOO_LARGE');
    expect(error.status).toBe(413);
  });

  it('429 QUOTA_EXCEEDED: RateLimitError with retryAfter and resetAt, never retried', async () => {
    const limited = await startTestServer({
      dbPath: join(work.dir, 'quota.sqlite'),
      overrides: { proDailyLimit: 2 },
    });
    try {
      const { key: limitedKey } = await proAccount(limited.db, 'quota@example.com');
      const c = new Compresso(limitedKey, { baseUrl: limited.url, maxRetries: 5 });
      await c.usage();
      await c.usage();
      const error = await rejection(c.usage());
      expect(error).toBeInstanceOf(RateLimitError);
      const rate = error as RateLimitError;
      expect(rate.code).toBe('QUOTA_EXCEEDED');
      expect(rate.status).toBe(429);
      expect(rate.quotaExceeded).toBe(true);
      expect(rate.retryAfter).toBeGreaterThan(0);
      expect(rate.resetAt?.getUTCHours()).toBe(0);
      expect(rate.resetAt!.getTime()).toBeGreaterThan(Date.now());
      // Three requests reached the server: the 429 was not tried again.
      const usageRequests = limited.logLines.filter((l) => l['path'] === '/api/v1/usage').length;
      expect(usageRequests).toBe(3);
    } finally {
      await limited.close();
    }
  });
});
