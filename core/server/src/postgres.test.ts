import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createEngine } from '@compresso/engine';
import { createLogger, type Database, loadConfig, quotaDay } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from './app.ts';
import { createHttpServer, startServer } from './start.ts';
import { bearer, form, proAccount, smallJpeg } from './testing.ts';

/**
 * The server on PostgreSQL, as it runs when several processes share the load: two independent app
 * instances (own pool, own engine, own port) over one database. Needs the local PostgreSQL
 * (COMPRESSO_TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test); each run works in a
 * database of its own, dropped at the end.
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dbName = `cmp_srv_${randomBytes(4).toString('hex')}`;
const url = new URL(ADMIN_URL);
url.pathname = `/${dbName}`;
const DATABASE_URL = url.toString();

const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });
const silent = createLogger({ logLevel: 'silent' });

beforeAll(async () => {
  try {
    await admin.query(`CREATE DATABASE "${dbName}"`);
  } catch (error) {
    throw new Error(
      `These tests need PostgreSQL at ${ADMIN_URL} (set COMPRESSO_TEST_DATABASE_URL to use another): ${(error as Error).message}`,
    );
  }
});

afterAll(async () => {
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}_start" WITH (FORCE)`);
  await admin.end();
});

interface Instance {
  url: string;
  db: Database;
  server: Server;
  close(): Promise<void>;
}

/** One "process": its own pool and engine over the shared database. */
async function instance(): Promise<Instance> {
  const config = loadConfig({}, { databaseUrl: DATABASE_URL, maxUploadBytes: 1024 * 1024 });
  const db = postgresDatabase({ url: DATABASE_URL, poolSize: 8 });
  await db.migrate();
  const engine = createEngine({ concurrency: 1, limits: { maxInputBytes: config.maxUploadBytes } });
  const server = createHttpServer(createApp({ engine, db, logger: silent, config }), config);
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    db,
    server,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await db.close();
    },
  };
}

describe('server on PostgreSQL, two processes', () => {
  it('600 parallel requests split over two servers: exactly 500 answered, 100 refused with 429', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    try {
      const { key, accountId } = await proAccount(a.db, 'pg-burst@example.com');
      const answers = await Promise.all(
        Array.from({ length: 600 }, (_, i) =>
          fetch(`${(i % 2 ? a : b).url}/api/v1/usage`, { headers: bearer(key) }).then(async (res) => ({
            status: res.status,
            retryAfter: res.headers.get('retry-after'),
            shouldRetry: res.headers.get('x-should-retry'),
            body: (await res.json()) as { used?: number; error?: { code: string } },
          })),
        ),
      );
      const ok = answers.filter((x) => x.status === 200);
      const refused = answers.filter((x) => x.status === 429);
      expect(ok).toHaveLength(500);
      expect(refused).toHaveLength(100);
      expect(new Set(ok.map((x) => x.body.used)).size).toBe(500);
      for (const x of refused) {
        expect(x.body.error?.code).toBe('QUOTA_EXCEEDED');
        expect(Number(x.retryAfter)).toBeGreaterThan(0);
        expect(x.shouldRetry).toBe('false');
      }
      expect(await b.db.usageOn(accountId, quotaDay())).toBe(500);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('compresses; a key made on one server works on the other; revoking it on one stops it on both at once', async () => {
    const [a, b] = await Promise.all([instance(), instance()]);
    try {
      const { key } = await proAccount(a.db, 'pg-keys@example.com');
      const res = await fetch(`${b.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(key),
        body: form(await smallJpeg(), { output_format: 'webp' }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/webp');
      expect((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).format).toBe('webp');

      const made = await fetch(`${a.url}/api/v1/key`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'ci' }),
      });
      expect(made.status).toBe(201);
      const second = (await made.json()) as { id: string; key: string };
      expect((await fetch(`${b.url}/api/v1/keys`, { headers: bearer(second.key) })).status).toBe(200);

      const revoked = await fetch(`${b.url}/api/v1/keys/${second.id}`, {
        method: 'DELETE',
        headers: bearer(key),
      });
      expect(revoked.status).toBe(200);
      for (const srv of [a, b]) {
        const after = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(second.key) });
        expect(after.status).toBe(401);
        expect(((await after.json()) as { error: { code: string } }).error.code).toBe('INVALID_API_KEY');
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('startServer with DATABASE_URL: migrates, reports postgres in /readyz, keeps data across restarts', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    // A database of its own: the first start must find it empty.
    await admin.query(`CREATE DATABASE "${dbName}_start"`);
    const startUrl = new URL(DATABASE_URL);
    startUrl.pathname = `/${dbName}_start`;
    const env = { DATABASE_URL: startUrl.toString(), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
    const first = await startServer({
      env,
      handleSignals: false,
      logger: createLogger({ logLevel: 'info' }, sink),
    });
    let key: string;
    try {
      const ready = await fetch(`${first.url}/readyz`);
      expect(await ready.json()).toEqual({ status: 'ready', database: 'postgres' });
      ({ key } = await proAccount(first.db, 'pg-restart@example.com'));
      expect((await fetch(`${first.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(200);
    } finally {
      await first.close();
    }
    expect(lines.join('')).toContain('"database":"postgres"');
    // The first-start hint points the CLI at the same database without repeating the URL (it may hold a password).
    const hint = lines.find((l) => l.includes('No accounts yet'));
    expect(hint).toContain('with the same DATABASE_URL');
    expect(lines.join('')).not.toContain(env.DATABASE_URL);

    const second = await startServer({ env, handleSignals: false, logger: silent });
    try {
      const usage = await fetch(`${second.url}/api/v1/usage`, { headers: bearer(key) });
      expect(usage.status).toBe(200);
      expect(((await usage.json()) as { used: number }).used).toBe(2);
    } finally {
      await second.close();
    }
  });
});
