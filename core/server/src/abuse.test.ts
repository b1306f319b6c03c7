import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileBlobStore, inlineQueue } from '@compresso/runtime';
import { ErrorBodySchema } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer, tempDir } from './testing.ts';

let srv: TestServer;
let key: string;
const tmp = tempDir();

beforeAll(async () => {
  // A queue and blob store so /api/v1/jobs parses forms too (no worker: nothing here must run).
  srv = await startTestServer({
    dbPath: join(tmp.dir, 'abuse.sqlite'),
    queue: inlineQueue(),
    blobs: fileBlobStore({ root: join(tmp.dir, 'blobs') }),
  });
  ({ key } = await proAccount(srv.db, 'abuse@example.com'));
});
afterAll(async () => {
  await srv.close();
  tmp.cleanup();
});

/** Send raw bytes on a fresh connection and return whatever comes back until the server closes or 2 s pass. */
function raw(payload: string | Buffer, destroyAfterWrite = false): Promise<string> {
  const { port } = new URL(srv.url);
  return new Promise((resolve) => {
    let received = '';
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(payload);
      if (destroyAfterWrite) {
        socket.destroy();
        resolve('');
      }
    });
    socket.setEncoding('utf8');
    socket.on('data', (c) => {
      received += c;
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(received));
    setTimeout(() => {
      socket.destroy();
      resolve(received);
    }, 2000).unref();
  });
}

async function code(res: Response): Promise<string> {
  return ErrorBodySchema.parse(await res.json()).error.code;
}

describe('hostile requests', () => {
  it('malformed multipart bodies are 400s', async () => {
    const post = (headers: Record<string, string>, body: string) =>
      fetch(`${srv.url}/api/v1/compress`, { method: 'POST', headers: { ...bearer(key), ...headers }, body });
    const noBoundary = await post({ 'content-type': 'multipart/form-data' }, 'hello');
    expect(noBoundary.status).toBe(400);
    expect(await code(noBoundary)).toBe('INVALID_REQUEST');
    const truncated = await post(
      { 'content-type': 'multipart/form-data; boundary=zz' },
      '--zz\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\nabc',
    );
    expect(truncated.status).toBe(400);
    expect(await code(truncated)).toBe('INVALID_REQUEST');
  });

  it('a second file, a file under another name, an oversized field: 400s naming the problem', async () => {
    const image = await smallJpeg();
    const two = form(image);
    two.append('file', new Blob([new Uint8Array(image)]), 'b.jpg');
    const twoRes = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: two,
    });
    expect(twoRes.status).toBe(400);

    const other = new FormData();
    other.append('image', new Blob([new Uint8Array(image)]), 'a.jpg');
    const otherRes = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: other,
    });
    expect(otherRes.status).toBe(400);
    expect(ErrorBodySchema.parse(await otherRes.json()).error.message).toContain('"image"');

    const long = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: form(image, { quality: '9'.repeat(5000) }),
    });
    expect(long.status).toBe(400);
    expect(await code(long)).toBe('INVALID_OPTION');
  });

  it('absurd Authorization headers are 401s', async () => {
    const huge = await fetch(`${srv.url}/api/v1/usage`, {
      headers: { authorization: `Bearer ${'x'.repeat(8000)}` },
    });
    expect(huge.status).toBe(401);
    const spaced = await fetch(`${srv.url}/api/v1/usage`, {
      headers: { authorization: `Bearer ${key} extra` },
    });
    expect(spaced.status).toBe(401);
  });

  it('garbage on the socket, and clients vanishing mid-upload, leave the server serving', async () => {
    const garbage = await raw('\x00\x01\x02 not http at all\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400/);
    const boundary = 'vanish';
    const partial =
      `POST /api/v1/compress HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 100000\r\n\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\n${'x'.repeat(500)}`;
    for (let i = 0; i < 20; i++) await raw(partial, true);
    // The server has seen the uploads vanish (it logs them aborted) before it is asked to serve again.
    await vi.waitFor(
      () => expect(srv.logLines.some((l) => l.path === '/api/v1/compress' && l.aborted === true)).toBe(true),
      { timeout: 10_000, interval: 20 },
    );
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
    const ok = await fetch(`${srv.url}/api/v1/info`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg()),
    });
    expect(ok.status).toBe(200);
  });

  it('path tricks and odd methods get JSON errors, not crashes', async () => {
    expect(
      (await fetch(`${srv.url}/api/v1/keys/%E0%A4%A`, { method: 'DELETE', headers: bearer(key) })).status,
    ).toBeLessThan(500);
    expect((await fetch(`${srv.url}/api/v1/../../etc/passwd`)).status).toBe(404);
    const patch = await fetch(`${srv.url}/api/v1/usage`, { method: 'PATCH', headers: bearer(key) });
    expect(patch.status).toBe(405);
    expect(await code(patch)).toBe('METHOD_NOT_ALLOWED');
  });

  it('Expect: 100-continue — a refused upload is answered before its body is sent; an accepted one gets 100', async () => {
    const image = await smallJpeg();
    const boundary = 'continue-boundary';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.jpg"\r\n\r\n`),
      image,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const attempt = (authorization: string, length: number) =>
      new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
        let continued = false;
        const req = httpRequest(`${srv.url}/api/v1/info`, {
          method: 'POST',
          headers: {
            authorization,
            expect: '100-continue',
            'content-type': `multipart/form-data; boundary=${boundary}`,
            'content-length': String(length),
          },
        });
        req.on('continue', () => {
          continued = true;
          req.end(body);
        });
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, continued }));
        });
        req.on('error', reject);
        req.flushHeaders();
      });
    expect(await attempt('Bearer nope', body.length)).toEqual({ status: 401, continued: false });
    expect(await attempt(`Bearer ${key}`, 500 * 1024 * 1024)).toEqual({ status: 413, continued: false });
    expect(await attempt(`Bearer ${key}`, body.length)).toEqual({ status: 200, continued: true });
  });
});

describe('option fields in multipart forms', () => {
  // Both parsers (one image, and a batch job) share one rule; each endpoint is checked here.
  for (const path of ['/api/v1/compress', '/api/v1/jobs']) {
    it(`${path}: a field sent twice or longer than 1024 bytes is a 400 naming it`, async () => {
      const jpeg = await smallJpeg();
      const twice = form(jpeg, { output_format: 'webp' });
      twice.append('quality', '70');
      twice.append('quality', '30');
      let res = await fetch(`${srv.url}${path}`, { method: 'POST', headers: bearer(key), body: twice });
      expect(res.status).toBe(400);
      let body = ErrorBodySchema.parse(await res.json()).error;
      expect(body).toMatchObject({ code: 'INVALID_OPTION', message: 'quality: sent more than once.' });

      res = await fetch(`${srv.url}${path}`, {
        method: 'POST',
        headers: bearer(key),
        body: form(jpeg, { output_format: 'w'.repeat(2000) }),
      });
      expect(res.status).toBe(400);
      body = ErrorBodySchema.parse(await res.json()).error;
      expect(body.code).toBe('INVALID_OPTION');
      expect(body.message).toBe('output_format: value longer than 1024 bytes.');
    });
  }
});
