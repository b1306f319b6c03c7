import { CompressOptionsSchema } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer } from './testing.ts';

/**
 * The hot path validates the options once: the server at its boundary. The engine's own call to
 * parseCompressOptions gets the server's (frozen) result back without a second schema run.
 */
let srv: TestServer;
let apiKey: string;
beforeAll(async () => {
  srv = await startTestServer();
  ({ key: apiKey } = await proAccount(srv.db, 'one-parse@example.com'));
});
afterAll(async () => {
  vi.restoreAllMocks();
  await srv.close();
});

describe('options on the compress hot path', () => {
  it('are parsed by the schema once per request', async () => {
    const jpeg = await smallJpeg();
    const spy = vi.spyOn(CompressOptionsSchema, 'safeParse');
    for (const route of ['compress', 'info']) {
      spy.mockClear();
      const res = await fetch(`${srv.url}/api/v1/${route}`, {
        method: 'POST',
        headers: bearer(apiKey),
        body: form(jpeg, { quality: '70', output_format: 'webp' }),
      });
      expect(res.status, route).toBe(200);
      await res.arrayBuffer();
      expect(spy, route).toHaveBeenCalledTimes(1);
    }
  });

  it('still once with an Idempotency-Key (the fingerprint hashes the fields, never parses them), and not at all for a replay', async () => {
    const jpeg = await smallJpeg();
    const spy = vi.spyOn(CompressOptionsSchema, 'safeParse');
    for (const route of ['compress', 'info']) {
      const key = `one-parse-${route}`;
      const send = () =>
        fetch(`${srv.url}/api/v1/${route}`, {
          method: 'POST',
          headers: { ...bearer(apiKey), 'idempotency-key': key },
          body: form(jpeg, { quality: '70', output_format: 'webp' }),
        });
      spy.mockClear();
      const first = await send();
      expect(first.status, route).toBe(200);
      await first.arrayBuffer();
      expect(spy, route).toHaveBeenCalledTimes(1);
      spy.mockClear();
      const replay = await send();
      expect(replay.status, route).toBe(200);
      expect(replay.headers.get('idempotent-replayed'), route).toBe('true');
      await replay.arrayBuffer();
      expect(spy, `${route} replay`).toHaveBeenCalledTimes(0);
    }
  });
});
