import { request } from 'node:http';
import { join } from 'node:path';
import { ConfigError, loadConfig, quotaDay } from '@compresso/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, tempDir } from './test-helpers.ts';
import { createUploadBudget } from './upload-budget.ts';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

describe('createUploadBudget', () => {
  it('admits uploads while their bytes fit, always admits one alone, and releases once', () => {
    const budget = createUploadBudget(100);
    const a = budget.tryReserve(60);
    expect(a).toBeTypeOf('function');
    expect(budget.tryReserve(50)).toBeUndefined();
    const b = budget.tryReserve(40);
    expect(budget).toMatchObject({ reserved: 100, uploads: 2 });
    a!();
    a!();
    expect(budget).toMatchObject({ reserved: 40, uploads: 1 });
    b!();
    // Larger than the whole budget, but nothing else is in flight: admitted rather than refused forever.
    const big = budget.tryReserve(500);
    expect(big).toBeTypeOf('function');
    expect(budget.tryReserve(1)).toBeUndefined();
    big!();
    expect(budget).toMatchObject({ reserved: 0, uploads: 0 });
    expect(() => createUploadBudget(0)).toThrow(RangeError);
  });

  it('config: 512 MiB by default (or the upload limit if larger); never below the upload limit', () => {
    expect(loadConfig({}).uploadMemoryBytes).toBe(512 * 1024 * 1024);
    expect(loadConfig({ COMPRESSO_MAX_UPLOAD_BYTES: String(600 * 1024 * 1024) }).uploadMemoryBytes).toBe(
      600 * 1024 * 1024,
    );
    expect(loadConfig({ COMPRESSO_UPLOAD_MEMORY_BYTES: '100000000' }).uploadMemoryBytes).toBe(100_000_000);
    expect(() =>
      loadConfig({ COMPRESSO_UPLOAD_MEMORY_BYTES: '1000', COMPRESSO_MAX_UPLOAD_BYTES: '2000' }),
    ).toThrow(/COMPRESSO_UPLOAD_MEMORY_BYTES: must be at least COMPRESSO_MAX_UPLOAD_BYTES \(2000\)/);
    expect(() => loadConfig({ COMPRESSO_UPLOAD_MEMORY_BYTES: 'lots' })).toThrow(ConfigError);
  });
});

interface Held {
  /** Resolves once the server sent 100 Continue, i.e. once the upload holds its reservation. */
  continued: Promise<void>;
  destroy(): void;
}

/** A chunked upload (length unknown, so it reserves the whole upload limit) that sends its first bytes and stalls. */
function stalledChunkedUpload(url: string, key: string): Held {
  const boundary = 'stall';
  const req = request(`${url}/api/v1/compress`, {
    method: 'POST',
    headers: {
      ...bearer(key),
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'transfer-encoding': 'chunked',
      expect: '100-continue',
    },
  });
  req.on('error', () => {});
  const continued = new Promise<void>((resolve, reject) => {
    req.on('continue', () => {
      req.write(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
      );
      req.write(Buffer.alloc(1000, 1));
      resolve();
    });
    req.on('response', (res) => reject(new Error(`answered ${res.statusCode} instead of reading`)));
  });
  req.flushHeaders();
  return { continued, destroy: () => req.destroy() };
}

describe('upload memory budget over HTTP', () => {
  it('503 with Retry-After while the budget is taken, without reading the body; refunded; admitted again after', async () => {
    const srv = await startTestServer({
      dbPath: join(tmp.dir, 'budget.sqlite'),
      overrides: { maxUploadBytes: 100_000, uploadMemoryBytes: 150_000, idleTimeoutMs: 20_000 },
    });
    try {
      const { key, accountId } = await proAccount(srv.db, 'budget@example.com');
      const jpeg = await smallJpeg();
      const held = stalledChunkedUpload(srv.url, key);
      await held.continued;
      // 100 000 of 150 000 bytes are reserved; a declared 60 kB body does not fit, a 1 kB one does.
      const big = await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(key),
        body: form(Buffer.concat([jpeg, Buffer.alloc(60_000)])),
      });
      expect(big.status).toBe(503);
      expect(big.headers.get('retry-after')).toBe('2');
      const body = (await big.json()) as { error: { code: string; request_id: string } };
      expect(body.error.code).toBe('SERVICE_UNAVAILABLE');
      expect(body.error.request_id).toBe(big.headers.get('x-request-id'));
      const small = await fetch(`${srv.url}/api/v1/info`, {
        method: 'POST',
        headers: bearer(key),
        body: form(jpeg),
      });
      expect(small.status).toBe(200);

      // A client that waits for 100 Continue is refused before it sends any of its body.
      const refused = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
        let continued = false;
        const req = request(`${srv.url}/api/v1/compress`, {
          method: 'POST',
          headers: {
            ...bearer(key),
            'content-type': 'multipart/form-data; boundary=x',
            'content-length': '90000',
            expect: '100-continue',
          },
        });
        req.on('continue', () => {
          continued = true;
        });
        req.on('response', (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, continued });
          req.destroy();
        });
        req.on('error', reject);
        req.flushHeaders();
      });
      expect(refused).toEqual({ status: 503, continued: false });

      // 503 is our side's refusal: it is given back. Counted: the stalled upload, the 200 and this call.
      const usage = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(key) });
      expect(((await usage.json()) as { used: number }).used).toBe(3);
      expect(await srv.db.usageOn(accountId, quotaDay())).toBe(3);

      held.destroy();
      let after = 0;
      for (let i = 0; i < 50 && after !== 200; i++) {
        await new Promise((r) => setTimeout(r, 20));
        const res = await fetch(`${srv.url}/api/v1/compress`, {
          method: 'POST',
          headers: bearer(key),
          body: form(Buffer.concat([jpeg, Buffer.alloc(60_000)])),
        });
        await res.arrayBuffer();
        after = res.status;
        expect([200, 503]).toContain(after);
      }
      expect(after).toBe(200);

      // The OpenAPI document tells clients about the 503 and its Retry-After.
      const doc = (await (await fetch(`${srv.url}/api/v1/openapi.json`)).json()) as {
        paths: Record<string, { post?: { responses: Record<string, { headers?: object }> } }>;
      };
      for (const path of ['/api/v1/compress', '/api/v1/info']) {
        expect(doc.paths[path]?.post?.responses['503']?.headers).toHaveProperty('Retry-After');
      }
    } finally {
      await srv.close();
    }
  });
});
