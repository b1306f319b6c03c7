import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { createAccount, createApiKey } from '@compresso/runtime';
import { ErrorBodySchema, InfoResultSchema } from '@compresso/schema';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer, tempDir } from './testing.ts';

let srv: TestServer;
let alice: { accountId: string; key: string; keyId: string };
const tmp = tempDir();

beforeAll(async () => {
  srv = await startTestServer({ dbPath: join(tmp.dir, 'app.sqlite'), overrides: { idleTimeoutMs: 300 } });
  alice = await proAccount(srv.db, 'alice@example.com');
});
afterAll(async () => {
  await srv.close();
  tmp.cleanup();
});

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  const body = ErrorBodySchema.parse(await res.json());
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error;
}

describe('health', () => {
  it('answers /healthz and /readyz without a key', async () => {
    const health = await fetch(`${srv.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${srv.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', database: 'sqlite' });
    expect(ready.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('authentication and plan', () => {
  it('401 UNAUTHENTICATED without a key, INVALID_API_KEY with a wrong one', async () => {
    await expectError(await fetch(`${srv.url}/api/v1/usage`), 401, 'UNAUTHENTICATED');
    await expectError(
      await fetch(`${srv.url}/api/v1/usage`, { headers: { authorization: 'Basic abc' } }),
      401,
      'UNAUTHENTICATED',
    );
    await expectError(
      await fetch(`${srv.url}/api/v1/usage`, { headers: bearer('nope') }),
      401,
      'INVALID_API_KEY',
    );
    const lookalike = `cmp_live_${'A'.repeat(43)}`;
    await expectError(
      await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(lookalike) }),
      401,
      'INVALID_API_KEY',
    );
  });

  it('403 PLAN_REQUIRED for an account without Pro', async () => {
    const free = await createAccount(srv.db, 'free@example.com');
    const { secret } = await createApiKey(srv.db, free.id);
    const error = await expectError(
      await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(secret) }),
      403,
      'PLAN_REQUIRED',
    );
    expect(error.details).toEqual({ plan: 'free', required: 'pro' });
  });

  it('keeps the incoming X-Request-Id when it is sane, replaces it when not', async () => {
    const kept = await fetch(`${srv.url}/healthz`, { headers: { 'x-request-id': 'trace-123' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-123');
    const replaced = await fetch(`${srv.url}/healthz`, {
      headers: { 'x-request-id': 'bad id\twith spaces' },
    });
    // Replaced by a fresh UUID (not "not containing 'bad'": a random UUID can start with bad…).
    expect(replaced.headers.get('x-request-id')).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });
});

describe('POST /api/v1/compress', () => {
  it('converts a JPEG to WebP with the right headers and file name', async () => {
    const input = await smallJpeg();
    const res = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(input, { output_format: 'WEBP', quality: '70' }, 'holiday photo.jpg'),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/webp');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="holiday_photo.webp"');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.headers.get('x-output-size')).toBe(String(bytes.length));
    expect(res.headers.get('x-input-size')).toBe(String(input.length));
    expect(res.headers.get('x-input-format')).toBe('jpeg');
    expect(res.headers.get('x-output-format')).toBe('webp');
    expect(res.headers.get('x-quality')).toBe('70');
    expect(res.headers.get('x-width')).toBe('64');
    expect(res.headers.get('x-height')).toBe('64');
    expect(Number(res.headers.get('x-savings-percent'))).toBeGreaterThan(0);
    expect(res.headers.get('ratelimit-limit')).toBe('500');
    const meta = await sharp(bytes).metadata();
    expect(meta.format).toBe('webp');
    expect(meta.width).toBe(64);
  });

  it('converts to AVIF and resizes with max_dimension', async () => {
    const res = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(await smallJpeg(), { output_format: 'avif', max_dimension: '32' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/avif');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="photo.avif"');
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect(meta.format).toBe('heif');
    expect(meta.width).toBe(32);
  });

  it('400 INVALID_OPTION naming the field and the value', async () => {
    const res = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(await smallJpeg(), { quality: '900' }),
    });
    const error = await expectError(res, 400, 'INVALID_OPTION');
    expect(error.message).toContain('quality');
    expect(error.message).toContain('"900"');
    expect(error.details).toEqual([{ field: 'quality', expected: expect.any(String), received: '"900"' }]);
  });

  it('400 INVALID_OPTION for an unknown field and for a repeated one', async () => {
    const unknown = await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(alice.key),
        body: form(await smallJpeg(), { qualty: '50' }),
      }),
      400,
      'INVALID_OPTION',
    );
    expect(unknown.message).toContain('qualty');
    const body = form(await smallJpeg(), { quality: '50' });
    body.append('quality', '60');
    const twice = await expectError(
      await fetch(`${srv.url}/api/v1/compress`, { method: 'POST', headers: bearer(alice.key), body }),
      400,
      'INVALID_OPTION',
    );
    expect(twice.message).toContain('quality');
  });

  it('400 MISSING_FILE without a file, INVALID_REQUEST without multipart', async () => {
    await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(alice.key),
        body: form(undefined, { quality: '50' }),
      }),
      400,
      'MISSING_FILE',
    );
    await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: { ...bearer(alice.key), 'content-type': 'application/json' },
        body: '{}',
      }),
      400,
      'INVALID_REQUEST',
    );
  });

  it('415 for a file that is not an image, 422 for an empty or corrupt one', async () => {
    const text = new TextEncoder().encode('hello, this is not an image at all');
    await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(alice.key),
        body: form(text),
      }),
      415,
      'NOT_AN_IMAGE',
    );
    await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(alice.key),
        body: form(new Uint8Array(0)),
      }),
      422,
      'EMPTY_FILE',
    );
    const truncated = (await smallJpeg()).subarray(0, 300);
    const res = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(truncated),
    });
    expect(res.status).toBe(422);
  });

  it('413 FILE_TOO_LARGE from the declared length, before reading the body', async () => {
    const big = new Uint8Array(srv.config.maxUploadBytes + 200 * 1024);
    await expectError(
      await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(alice.key),
        body: form(big),
      }),
      413,
      'FILE_TOO_LARGE',
    );
  });

  it('413 FILE_TOO_LARGE while streaming a chunked body that never ends, without waiting for it', async () => {
    const boundary = 'compresso-test-boundary';
    const limit = srv.config.maxUploadBytes;
    const result = await new Promise<{ status: number; body: string; sent: number }>((resolve, reject) => {
      let sent = 0;
      let answered = false;
      const req = httpRequest(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: { ...bearer(alice.key), 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
      req.on('response', (res) => {
        answered = true;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, sent }));
      });
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      req.write(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
      );
      const chunk = Buffer.alloc(64 * 1024, 0xab);
      // Up to 200× the limit: only an answer in the middle of the stream stops this loop early.
      const pump = () => {
        while (!answered && sent < limit * 200) {
          sent += chunk.length;
          if (!req.write(chunk)) {
            req.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    expect(result.status).toBe(413);
    expect(JSON.parse(result.body).error.code).toBe('FILE_TOO_LARGE');
    expect(result.sent).toBeLessThan(limit * 20);
  });

  it('408 REQUEST_TIMEOUT for an upload that stalls, and the server stays up', async () => {
    const boundary = 'stall-boundary';
    const result = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: { ...bearer(alice.key), 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on('error', reject);
      req.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.jpg"\r\n\r\n`);
      req.write(Buffer.alloc(1000));
      // …and then nothing more.
    });
    expect(result.status).toBe(408);
    expect(JSON.parse(result.body).error.code).toBe('REQUEST_TIMEOUT');
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });
});

describe('POST /api/v1/info', () => {
  it('answers the InfoResult JSON', async () => {
    const input = await smallJpeg();
    const res = await fetch(`${srv.url}/api/v1/info`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(input, { output_format: 'webp' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const info = InfoResultSchema.parse(await res.json());
    expect(info.input_size).toBe(input.length);
    expect(info.output_format).toBe('webp');
    expect(info.width).toBe(64);
    expect(res.headers.get('x-output-size')).toBe(String(info.output_size));
  });

  it('quality "auto" reports its score and the encoder settings it chose, in the JSON and as headers', async () => {
    // A synthetic 240×160 image (flat colours, thin coloured lines): auto writes it at 4:4:4 chroma.
    const lines = Array.from({ length: 12 }, (_, i) => ({
      input: {
        create: { width: 200, height: 1, channels: 3 as const, background: i % 2 ? '#d02020' : '#2040e0' },
      },
      top: 20 + i * 10,
      left: 20,
    }));
    const input = await sharp({ create: { width: 240, height: 160, channels: 3, background: '#ffffff' } })
      .composite(lines)
      .png()
      .toBuffer();
    const res = await fetch(`${srv.url}/api/v1/info`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(input, { output_format: 'jpeg', quality: 'auto' }),
    });
    expect(res.status).toBe(200);
    const info = InfoResultSchema.parse(await res.json());
    expect(info).toMatchObject({ auto_quality: true, chroma_subsampling: '4:4:4' });
    expect(info.score).toBeGreaterThanOrEqual(70);
    expect(info.auto_steps).toBeGreaterThan(0);
    expect(res.headers.get('x-chroma-subsampling')).toBe('4:4:4');
    expect(res.headers.get('x-score')).toBe(String(info.score));
    expect(res.headers.get('x-auto-steps')).toBe(String(info.auto_steps));
    const webp = await fetch(`${srv.url}/api/v1/info`, {
      method: 'POST',
      headers: bearer(alice.key),
      body: form(input, { output_format: 'webp', quality: 'auto' }),
    });
    expect(webp.headers.get('x-lossless')).toBe('true');
    expect(webp.headers.get('x-effort')).toBe('4');
  });
});

describe('routing errors', () => {
  it('404 NOT_FOUND for an unknown route, 405 with Allow for a wrong method', async () => {
    const missing = await expectError(await fetch(`${srv.url}/api/v1/nothing-here`), 404, 'NOT_FOUND');
    expect(missing.message).toContain('/api/v1/nothing-here');
    const wrong = await fetch(`${srv.url}/api/v1/compress`, { headers: bearer(alice.key) });
    expect(wrong.headers.get('allow')).toBe('POST');
    await expectError(wrong, 405, 'METHOD_NOT_ALLOWED');
  });
});

describe('keys', () => {
  it('creates a key shown once, lists keys without secrets, revokes at once', async () => {
    const owner = await proAccount(srv.db, 'keys-owner@example.com');
    const created = await fetch(`${srv.url}/api/v1/key`, {
      method: 'POST',
      headers: { ...bearer(owner.key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'ci' }),
    });
    expect(created.status).toBe(201);
    const newKey = (await created.json()) as { id: string; key: string; prefix: string; name: string };
    expect(newKey.name).toBe('ci');
    expect(newKey.key).toMatch(/^cmp_live_[A-Za-z0-9_-]{43}$/);
    expect(newKey.key.startsWith(newKey.prefix)).toBe(true);

    // The new key works.
    expect((await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(newKey.key) })).status).toBe(200);

    const listed = await fetch(`${srv.url}/api/v1/keys`, { headers: bearer(owner.key) });
    const text = await listed.text();
    expect(text).not.toContain(newKey.key);
    expect(text).not.toContain(owner.key);
    const { keys } = JSON.parse(text) as {
      keys: { id: string; name: string; last_used_at: string | null }[];
    };
    expect(keys.map((k) => k.name).sort()).toEqual(['ci', 'test']);
    expect(keys.find((k) => k.id === newKey.id)?.last_used_at).not.toBeNull();
    expect(Object.keys(keys[0]!).sort()).toEqual([
      'created_at',
      'id',
      'last_used_at',
      'name',
      'prefix',
      'revoked_at',
    ]);

    const revoked = await fetch(`${srv.url}/api/v1/keys/${newKey.id}`, {
      method: 'DELETE',
      headers: bearer(owner.key),
    });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toEqual({ id: newKey.id, revoked: true });
    await expectError(
      await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(newKey.key) }),
      401,
      'INVALID_API_KEY',
    );
    // A second revoke finds nothing active.
    await expectError(
      await fetch(`${srv.url}/api/v1/keys/${newKey.id}`, { method: 'DELETE', headers: bearer(owner.key) }),
      404,
      'NOT_FOUND',
    );
  });

  it('a key can be created without a body; a bad body is 400', async () => {
    const owner = await proAccount(srv.db, 'nobody-body@example.com');
    const res = await fetch(`${srv.url}/api/v1/key`, { method: 'POST', headers: bearer(owner.key) });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { name: string }).name).toBe('default');
    await expectError(
      await fetch(`${srv.url}/api/v1/key`, {
        method: 'POST',
        headers: { ...bearer(owner.key), 'content-type': 'application/json' },
        body: '{"name": ',
      }),
      400,
      'INVALID_REQUEST',
    );
    await expectError(
      await fetch(`${srv.url}/api/v1/key`, {
        method: 'POST',
        headers: { ...bearer(owner.key), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'x'.repeat(101) }),
      }),
      400,
      'INVALID_REQUEST',
    );
  });

  it("one account can neither see nor revoke another's keys", async () => {
    const bob = await proAccount(srv.db, 'bob@example.com');
    const mallory = await proAccount(srv.db, 'mallory@example.com');
    const seen = (await (await fetch(`${srv.url}/api/v1/keys`, { headers: bearer(mallory.key) })).json()) as {
      keys: { id: string }[];
    };
    expect(seen.keys.map((k) => k.id)).toEqual([mallory.keyId]);
    await expectError(
      await fetch(`${srv.url}/api/v1/keys/${bob.keyId}`, { method: 'DELETE', headers: bearer(mallory.key) }),
      404,
      'NOT_FOUND',
    );
    expect((await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(bob.key) })).status).toBe(200);
  });
});

describe('usage and quota accounting', () => {
  it('counts authenticated requests, 4xx included; not 401s', async () => {
    const carol = await proAccount(srv.db, 'carol@example.com');
    const usage = async () =>
      (await (await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(carol.key) })).json()) as Record<
        string,
        unknown
      >;
    const first = await usage();
    expect(first).toMatchObject({ plan: 'pro', used: 1, limit: 500, remaining: 499 });
    expect(first.resets_at).toMatch(/T00:00:00\.000Z$/);
    await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(carol.key),
      body: form(await smallJpeg(), { quality: 'abc' }),
    });
    await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(`${carol.key.slice(0, -1)}x`) });
    const third = await usage();
    expect(third).toMatchObject({ used: 3, remaining: 497 });
  });
});

describe('logging', () => {
  it('writes one line per request and never a key or the Authorization header', async () => {
    const before = srv.logLines.length;
    const res = await fetch(`${srv.url}/api/v1/usage`, {
      headers: { ...bearer(alice.key), 'x-request-id': 'log-check-1' },
    });
    expect(res.status).toBe(200);
    // The line is written as the response finishes, which may be after the client has it.
    const linesOf = () => srv.logLines.slice(before).filter((l) => l.request_id === 'log-check-1');
    await vi.waitFor(() => expect(linesOf()).toHaveLength(1), { timeout: 5000, interval: 10 });
    const lines = linesOf();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      method: 'GET',
      path: '/api/v1/usage',
      status: 200,
      account_id: alice.accountId,
    });
    const all = srv.rawLog.join('');
    expect(all).not.toContain(alice.key);
    expect(all.toLowerCase()).not.toContain('bearer');
  });
});

describe('OpenAPI and docs', () => {
  it('serves an OpenAPI 3.1 document built from the schema, and an HTML reference', async () => {
    const res = await fetch(`${srv.url}/api/v1/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/api/v1/compress',
        '/api/v1/info',
        '/api/v1/jobs',
        '/api/v1/jobs/{id}',
        '/api/v1/jobs/{id}/items/{index}',
        '/api/v1/key',
        '/api/v1/keys',
        '/api/v1/keys/{id}',
        '/api/v1/usage',
        '/api/v1/generate',
        '/api/v1/operator/accounts',
        '/api/v1/edit',
        '/api/v1/alt-text',
        '/api/v1/openapi.json',
        '/api/v1/docs',
        '/healthz',
        '/readyz',
      ].sort(),
    );
    expect(Object.keys(doc.components.schemas.CompressOptions?.properties ?? {})).toEqual(
      expect.arrayContaining(['quality', 'output_format', 'max_dimension', 'strip_exif', 'png_to_jpeg']),
    );
    const upload = (
      doc.paths['/api/v1/compress']!.post as {
        requestBody: {
          content: Record<string, { schema: { required: string[]; properties: Record<string, unknown> } }>;
        };
      }
    ).requestBody.content['multipart/form-data']!.schema;
    expect(upload.required).toEqual(['file']);
    expect(Object.keys(upload.properties).sort()).toEqual(
      ['file', 'max_dimension', 'output_format', 'png_to_jpeg', 'quality', 'strip_exif'].sort(),
    );
    const html = await fetch(`${srv.url}/docs`);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    const page = await html.text();
    const text = page.replace(/<[^>]+>/g, '');
    expect(text).toContain('POST /api/v1/compress');
    expect(text).toContain('max_dimension');
  });
});
