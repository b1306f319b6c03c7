import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { createLogger } from '@compresso/runtime';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startServer } from './start.ts';
import { proAccount, smallJpeg, tempDir } from './testing.ts';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

function memoryLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _e, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger({ logLevel: 'info' }, sink) };
}

describe('startServer', () => {
  it('refuses an invalid configuration with every problem in one message', async () => {
    await expect(
      startServer({ env: { PORT: 'x', COMPRESSO_PRO_DAILY_LIMIT: '-3' }, handleSignals: false }),
    ).rejects.toThrow(/PORT[\s\S]*COMPRESSO_PRO_DAILY_LIMIT/);
  });

  it('logs how to make the first account on an empty database, without any secret', async () => {
    const { lines, logger } = memoryLogger();
    const running = await startServer({
      env: { COMPRESSO_DATA_DIR: `${tmp.dir}/first`, PORT: '0', HOST: '127.0.0.1' },
      logger,
      handleSignals: false,
    });
    try {
      const hint = lines.find((l) => String(l.msg).startsWith('No accounts yet'));
      expect(hint?.next_steps).toEqual(
        expect.arrayContaining(['npx compresso account create --email you@example.com']),
      );
      // The browser way in, at this server's own address.
      expect(hint?.msg).toContain(`sign up at ${running.url}/signup`);
      expect(JSON.stringify(lines)).not.toMatch(/cmp_live_/);
      expect((await fetch(`${running.url}/readyz`)).status).toBe(200);
    } finally {
      await running.close();
    }
  });

  it('graceful close: finishes an in-flight upload, refuses new connections, then closes the database', async () => {
    const { logger } = memoryLogger();
    const running = await startServer({
      env: { COMPRESSO_DATA_DIR: `${tmp.dir}/graceful`, PORT: '0', HOST: '127.0.0.1' },
      logger,
      handleSignals: false,
    });
    const { key } = await proAccount(running.db, 'graceful@example.com');
    const image = await smallJpeg();
    const boundary = 'graceful-boundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="output_format"\r\n\r\nwebp\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="g.jpg"\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    // The server has the request (its headers and the first bytes) in hand before shutdown begins.
    const arrived = new Promise<void>((resolve) => running.server.once('request', () => resolve()));
    let req!: ReturnType<typeof httpRequest>;
    const answer = new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
      req = httpRequest(`${running.url}/api/v1/compress`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(head.length + image.length + tail.length),
        },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] }));
      });
      req.on('error', reject);
      req.write(head);
      req.write(image.subarray(0, 100));
    });
    await arrived;
    const closed = running.close();
    // Shutdown has stopped listening (close() gets there after a few awaits of its own).
    await vi.waitFor(() => expect(running.server.listening).toBe(false), { timeout: 30_000, interval: 5 });
    await expect(fetch(`${running.url}/healthz`)).rejects.toThrow();
    // The rest arrives after shutdown has begun.
    req.write(image.subarray(100));
    req.end(tail);
    expect(await answer).toEqual({ status: 200, type: 'image/webp' });
    await closed;
    await expect(running.db.ping()).rejects.toThrow();
  });
});
