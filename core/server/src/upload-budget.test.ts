import { request } from 'node:http';
import { join } from 'node:path';
import { ConfigError, loadConfig, quotaDay } from '@compresso/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, tempDir } from './testing.ts';
import { createUploadBudget } from './upload-budget.ts';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

describe('createUploadBudget', () => {
  const take = (budget: ReturnType<typeof createUploadBudget>, bytes: number, owner?: string) => {
    const r = budget.tryReserve(bytes, owner);
    return r.ok ? r.release : r.reason;
  };

  it('admits uploads while their bytes fit, always admits one alone, and releases once', () => {
    const budget = createUploadBudget(100);
    const a = take(budget, 60);
    expect(a).toBeTypeOf('function');
    expect(take(budget, 50)).toBe('server');
    const b = take(budget, 40);
    expect(budget).toMatchObject({ reserved: 100, uploads: 2 });
    (a as () => void)();
    (a as () => void)();
    expect(budget).toMatchObject({ reserved: 40, uploads: 1 });
    (b as () => void)();
    // Larger than the whole budget, but nothing else is in flight: admitted rather than refused forever.
    const big = take(budget, 500);
    expect(big).toBeTypeOf('function');
    expect(take(budget, 1)).toBe('server');
    (big as () => void)();
    expect(budget).toMatchObject({ reserved: 0, uploads: 0 });
    expect(() => createUploadBudget(0)).toThrow(RangeError);
  });

  it('one account holds at most half the budget, leaving the rest to the others', () => {
    const budget = createUploadBudget(1000);
    expect(budget.accountLimit).toBe(500);
    const a1 = take(budget, 300, 'acc_a');
    const a2 = take(budget, 200, 'acc_a');
    expect(take(budget, 1, 'acc_a')).toBe('account');
    expect(budget.reservedBy('acc_a')).toBe(500);
    // Another account still gets the other half; past it the whole server is full.
    const b1 = take(budget, 450, 'acc_b');
    expect(b1).toBeTypeOf('function');
    expect(take(budget, 100, 'acc_c')).toBe('server');
    (a1 as () => void)();
    expect(take(budget, 100, 'acc_a')).toBeTypeOf('function');
    // An account's first upload is bound only by the whole budget (one upload may exceed half).
    const solo = createUploadBudget(1000);
    expect(take(solo, 800, 'acc_s')).toBeTypeOf('function');
    expect(take(solo, 10, 'acc_s')).toBe('account');
    for (const r of [a2, b1]) (r as () => void)();
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
      const a = await proAccount(srv.db, 'budget-a@example.com');
      const b = await proAccount(srv.db, 'budget-b@example.com');
      const jpeg = await smallJpeg();
      const post = (key: string, body: FormData, path = 'compress') =>
        fetch(`${srv.url}/api/v1/${path}`, { method: 'POST', headers: bearer(key), body });
      // Account A's chunked upload reserves the whole upload limit (100 000 of 150 000 bytes).
      const held = stalledChunkedUpload(srv.url, a.key);
      await held.continued;

      // A is past its share (half the budget): even a tiny upload of A's waits.
      const mine = await post(a.key, form(jpeg), 'info');
      expect(mine.status).toBe(503);
      expect(((await mine.json()) as { error: { details: { limit: string } } }).error.details.limit).toBe(
        'account',
      );
      // B's declared 60 kB does not fit in what is left of the server; B's 1 kB does.
      const big = await post(b.key, form(Buffer.concat([jpeg, Buffer.alloc(60_000)])));
      expect(big.status).toBe(503);
      expect(big.headers.get('retry-after')).toBe('2');
      const body = (await big.json()) as {
        error: { code: string; request_id: string; details: { limit: string } };
      };
      expect(body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { limit: 'server' } });
      expect(body.error.request_id).toBe(big.headers.get('x-request-id'));
      const small = await post(b.key, form(jpeg), 'info');
      expect(small.status).toBe(200);

      // A client that waits for 100 Continue is refused before it sends any of its body.
      const refused = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
        let continued = false;
        const req = request(`${srv.url}/api/v1/compress`, {
          method: 'POST',
          headers: {
            ...bearer(b.key),
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

      // A 503 is our side's refusal and is given back: A counted the stalled upload only, B its 200.
      expect(await srv.db.usageOn(a.accountId, quotaDay())).toBe(1);
      expect(await srv.db.usageOn(b.accountId, quotaDay())).toBe(1);

      held.destroy();
      // The server frees A's reservation when it sees the socket close; until then B may still get 503.
      // A hang guard of 30 s, not a speed check: a loaded machine may take a while to notice.
      let after = 0;
      const deadline = Date.now() + 30_000;
      while (after !== 200 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        const res = await post(b.key, form(Buffer.concat([jpeg, Buffer.alloc(60_000)])));
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
