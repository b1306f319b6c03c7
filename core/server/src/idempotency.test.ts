import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createEngine, type Engine } from '@compresso/engine';
import {
  type BlobStore,
  createLogger,
  type Database,
  fileBlobStore,
  type IdempotencyStore,
  inlineQueue,
  loadConfig,
  quotaDay,
  sqliteDatabase,
} from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import express from 'express';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from './app.ts';
import { errorHandler } from './errors.ts';
import { createIdempotency, IDEMPOTENCY_TTL_MS, INLINE_ANSWER_BYTES } from './idempotency.ts';
import { createHttpServer } from './start.ts';
import { bearer, form, proAccount, smallJpeg, tempDir } from './testing.ts';

const tmp = tempDir();
const silent = createLogger({ logLevel: 'silent' });
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dbName = `cmp_idem_${randomBytes(4).toString('hex')}`;
const DATABASE_URL = (() => {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${dbName}`;
  return url.toString();
})();
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });

beforeAll(async () => {
  await admin.query(`CREATE DATABASE "${dbName}"`);
});
afterAll(async () => {
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
  tmp.cleanup();
});

interface Instance {
  url: string;
  db: Database;
  store: IdempotencyStore;
  blobs: BlobStore;
  close(): Promise<void>;
}

/** One app over the shared database: its own connection(s), idempotency store, engine and port. */
async function instance(
  backend: 'sqlite' | 'postgres',
  options: { file?: string; now?: () => Date; maxUploadBytes?: number; blobDir?: string } = {},
): Promise<Instance> {
  const config = loadConfig(
    {},
    { maxUploadBytes: options.maxUploadBytes ?? 1024 * 1024, logLevel: 'silent' },
  );
  const db: Database =
    backend === 'postgres'
      ? postgresDatabase({ url: DATABASE_URL, poolSize: 8 })
      : sqliteDatabase({ path: options.file! });
  await db.migrate();
  // The database's own store: each instance on its own connection(s) to the shared database.
  const store = db.idempotency;
  const engine: Engine = createEngine({ concurrency: 2, limits: { maxInputBytes: config.maxUploadBytes } });
  const queue = inlineQueue();
  const blobs = fileBlobStore({
    root: options.blobDir ?? join(tmp.dir, `blobs-${randomBytes(3).toString('hex')}`),
  });
  const app = createApp({
    engine,
    db,
    logger: silent,
    config,
    queue,
    blobs,
    ...(options.now ? { now: options.now } : {}),
  });
  const server: Server = createHttpServer(app, config);
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    db,
    store,
    blobs,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await queue.close();
      await engine.close();
      await blobs.close();
      await db.close();
    },
  };
}

interface Answer {
  status: number;
  replayed: boolean;
  type: string | null;
  outputSize: string | null;
  disposition: string | null;
  body: string;
}

async function post(url: string, key: string, idem: string, body: FormData | string): Promise<Answer> {
  const json = typeof body === 'string';
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      ...bearer(key),
      'idempotency-key': idem,
      ...(json ? { 'content-type': 'application/json' } : {}),
    },
    body,
  });
  return {
    status: res.status,
    replayed: res.headers.get('idempotent-replayed') === 'true',
    type: res.headers.get('content-type'),
    outputSize: res.headers.get('x-output-size'),
    disposition: res.headers.get('content-disposition'),
    body: Buffer.from(await res.arrayBuffer()).toString('base64'),
  };
}

/**
 * 20 keys × 10 duplicates, all 200 sent at once, alternating between the instances: each key spends
 * the quota once, and its 10 answers are the same answer (one worked, nine replayed or waited for it).
 */
async function burst(apps: Instance[], email: string) {
  const { key, accountId } = await proAccount(apps[0]!.db, email);
  const image = await smallJpeg();
  const before = await apps[0]!.db.usageOn(accountId, quotaDay());
  const keys = Array.from({ length: 20 }, (_, k) => `burst-${k}-${randomBytes(4).toString('hex')}`);
  const answers = await Promise.all(
    Array.from({ length: 200 }, (_, i) => {
      const k = i % 20;
      const app = apps[i % apps.length]!;
      // Each key compresses with its own quality: twenty different answers, ten copies of each.
      return post(
        `${app.url}/api/v1/compress`,
        key,
        keys[k]!,
        form(image, { output_format: 'webp', quality: String(30 + k) }, `burst-${k}.jpg`),
      ).then((answer) => ({ k, answer }));
    }),
  );
  expect(await apps[0]!.db.usageOn(accountId, quotaDay())).toBe(before + 20);
  for (let k = 0; k < 20; k++) {
    const mine = answers.filter((a) => a.k === k).map((a) => a.answer);
    expect(mine).toHaveLength(10);
    expect(mine.filter((a) => !a.replayed)).toHaveLength(1);
    const first = mine.find((a) => !a.replayed)!;
    expect(first.status).toBe(200);
    expect(first.type).toBe('image/webp');
    expect(first.disposition).toBe(`attachment; filename="burst-${k}.webp"`);
    for (const a of mine) expect({ ...a, replayed: false }).toEqual(first);
  }
  // Twenty distinct answers: a replay is of its own key's request, not another's.
  expect(new Set(answers.map((a) => a.answer.disposition)).size).toBe(20);
}

describe('Idempotency-Key on SQLite', () => {
  it('200 concurrent duplicated submissions (20 keys × 10) over two apps on one file: quota spent once per key, identical answers', async () => {
    const file = join(tmp.dir, 'burst.sqlite');
    const a = await instance('sqlite', { file });
    const b = await instance('sqlite', { file });
    try {
      await burst([a, b], 'burst-sqlite@example.com');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('same key, other request: 422 IDEMPOTENCY_KEY_REUSED, not counted; a malformed key is a 400 naming the header', async () => {
    const app = await instance('sqlite', { file: join(tmp.dir, 'reuse.sqlite') });
    try {
      const { key, accountId } = await proAccount(app.db, 'reuse@example.com');
      const image = await smallJpeg();
      const first = await post(`${app.url}/api/v1/compress`, key, 'k-1', form(image, { quality: '50' }));
      expect(first.status).toBe(200);
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(1);

      for (const other of [
        form(image, { quality: '51' }),
        form(image, { quality: '50' }, 'other-name.jpg'),
        form(Buffer.concat([image, Buffer.from([0])]), { quality: '50' }),
      ]) {
        const reused = await post(`${app.url}/api/v1/compress`, key, 'k-1', other);
        expect(reused.status).toBe(422);
        const body = JSON.parse(Buffer.from(reused.body, 'base64').toString()) as {
          error: { code: string; details: { field: string }[] };
        };
        expect(body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
        expect(body.error.details[0]!.field).toBe('Idempotency-Key');
      }
      // The same key on another route is another request.
      const info = await post(`${app.url}/api/v1/info`, key, 'k-1', form(image, { quality: '50' }));
      expect(info.status).toBe(422);
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(1);

      // Field order does not make a different request.
      const again = await post(
        `${app.url}/api/v1/compress`,
        key,
        'k-2',
        form(image, { quality: '50', strip_exif: 'true' }),
      );
      const reordered = new FormData();
      reordered.append('strip_exif', 'true');
      reordered.append('quality', '50');
      reordered.append('file', new Blob([new Uint8Array(image)], { type: 'image/jpeg' }), 'photo.jpg');
      const replay = await post(`${app.url}/api/v1/compress`, key, 'k-2', reordered);
      expect(replay.replayed).toBe(true);
      expect(replay.body).toBe(again.body);
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(2);

      for (const bad of ['', 'has space', 'x'.repeat(256), 'ünïcode']) {
        const res = await fetch(`${app.url}/api/v1/compress`, {
          method: 'POST',
          headers: { ...bearer(key), 'idempotency-key': bad },
          body: form(image),
        });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('INVALID_REQUEST');
        expect(body.error.message).toMatch(/^Idempotency-Key: /);
      }
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('a 4xx answer is kept and replayed; the key and its answer expire after 24 h (injected clock)', async () => {
    let clock = new Date('2026-03-01T10:00:00Z');
    const app = await instance('sqlite', { file: join(tmp.dir, 'expiry.sqlite'), now: () => clock });
    try {
      const { key, accountId } = await proAccount(app.db, 'expiry@example.com');
      const day = quotaDay(clock);
      const bad = await post(
        `${app.url}/api/v1/compress`,
        key,
        'e-1',
        form(await smallJpeg(), { quality: '900' }),
      );
      expect(bad.status).toBe(400);
      const again = await post(
        `${app.url}/api/v1/compress`,
        key,
        'e-1',
        form(await smallJpeg(), { quality: '900' }),
      );
      expect(again).toEqual({ ...bad, replayed: true });
      expect(await app.db.usageOn(accountId, day)).toBe(1);

      clock = new Date(clock.getTime() + IDEMPOTENCY_TTL_MS - 1);
      const within = await post(
        `${app.url}/api/v1/compress`,
        key,
        'e-1',
        form(await smallJpeg(), { quality: '60' }),
      );
      expect(within.status).toBe(422);

      clock = new Date(clock.getTime() + 1);
      const after = await post(
        `${app.url}/api/v1/compress`,
        key,
        'e-1',
        form(await smallJpeg(), { quality: '60' }),
      );
      expect(after.status).toBe(200);
      expect(after.replayed).toBe(false);
      expect(await app.db.usageOn(accountId, quotaDay(clock))).toBe(1);
    } finally {
      await app.close();
    }
  });

  it(`an answer over ${INLINE_ANSWER_BYTES} bytes is kept in the blob store and replayed byte for byte`, async () => {
    const blobDir = join(tmp.dir, 'big-blobs');
    const app = await instance('sqlite', {
      file: join(tmp.dir, 'big.sqlite'),
      maxUploadBytes: 8 * 1024 * 1024,
      blobDir,
    });
    try {
      const { key, accountId } = await proAccount(app.db, 'big@example.com');
      // Noise does not compress: a 400×400 PNG of it stays well over the inline bound.
      const noise = await sharp(randomBytes(400 * 400 * 3), { raw: { width: 400, height: 400, channels: 3 } })
        .png()
        .toBuffer();
      const first = await post(`${app.url}/api/v1/compress`, key, 'big-1', form(noise, {}, 'noise.png'));
      expect(first.status).toBe(200);
      expect(Number(first.outputSize)).toBeGreaterThan(INLINE_ANSWER_BYTES);
      // Recorded once the answer is written; the replay waits for the record, so it is there after.
      const replay = await post(`${app.url}/api/v1/compress`, key, 'big-1', form(noise, {}, 'noise.png'));
      expect(replay).toEqual({ ...first, replayed: true });
      const kept = [];
      for await (const entry of app.blobs.list('idempotency/')) kept.push(entry);
      expect(kept).toHaveLength(1);
      expect(kept[0]!.size).toBe(Number(first.outputSize));
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('POST /api/v1/jobs: ten duplicates make one job, counted once for its items', async () => {
    const app = await instance('sqlite', { file: join(tmp.dir, 'jobs.sqlite') });
    try {
      const { key, accountId } = await proAccount(app.db, 'jobs-idem@example.com');
      const body = JSON.stringify({
        urls: ['https://example.com/a.jpg', 'https://example.com/b.png'],
        options: { quality: 70 },
      });
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => post(`${app.url}/api/v1/jobs`, key, 'job-1', body)),
      );
      expect(answers.every((a) => a.status === 202)).toBe(true);
      expect(new Set(answers.map((a) => a.body)).size).toBe(1);
      expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
      expect(await app.db.usageOn(accountId, quotaDay())).toBe(2);
      // The same options in another key order are the same request.
      const reordered = await post(
        `${app.url}/api/v1/jobs`,
        key,
        'job-1',
        JSON.stringify({
          options: { quality: 70 },
          urls: ['https://example.com/a.jpg', 'https://example.com/b.png'],
        }),
      );
      expect(reordered.replayed).toBe(true);
      const other = await post(
        `${app.url}/api/v1/jobs`,
        key,
        'job-1',
        JSON.stringify({ urls: ['https://example.com/c.jpg'] }),
      );
      expect(other.status).toBe(422);
    } finally {
      await app.close();
    }
  });
});

describe('Idempotency-Key on PostgreSQL', () => {
  it('200 concurrent duplicated submissions (20 keys × 10) over two app instances with their own pools: quota spent once per key, identical answers', async () => {
    const [a, b] = await Promise.all([instance('postgres'), instance('postgres')]);
    try {
      await burst([a, b], 'burst-pg@example.com');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('expiry and reuse hold on PostgreSQL too (injected clock)', async () => {
    let clock = new Date('2026-03-01T10:00:00Z');
    const app = await instance('postgres', { now: () => clock });
    try {
      const { key, accountId } = await proAccount(app.db, 'expiry-pg@example.com');
      const first = await post(
        `${app.url}/api/v1/info`,
        key,
        'pg-e',
        form(await smallJpeg(), { quality: '40' }),
      );
      expect(first.status).toBe(200);
      expect(
        (await post(`${app.url}/api/v1/info`, key, 'pg-e', form(await smallJpeg(), { quality: '41' })))
          .status,
      ).toBe(422);
      expect(
        await post(`${app.url}/api/v1/info`, key, 'pg-e', form(await smallJpeg(), { quality: '40' })),
      ).toEqual({
        ...first,
        replayed: true,
      });
      clock = new Date(clock.getTime() + IDEMPOTENCY_TTL_MS);
      const later = await post(
        `${app.url}/api/v1/info`,
        key,
        'pg-e',
        form(await smallJpeg(), { quality: '41' }),
      );
      expect(later.status).toBe(200);
      expect(later.replayed).toBe(false);
      expect(await app.db.usageOn(accountId, quotaDay(new Date('2026-03-01T10:00:00Z')))).toBe(1);
      expect(await app.db.usageOn(accountId, quotaDay(clock))).toBe(1);
      // The purge takes what expired, and only that.
      const purged = await app.store.purge(clock.getTime() - IDEMPOTENCY_TTL_MS);
      expect(purged.deleted).toBe(0);
      expect((await app.store.purge(clock.getTime())).deleted).toBe(1);
    } finally {
      await app.close();
    }
  });
});

describe('the idempotency layer on its own', () => {
  /** A bare app: a stand-in for auth that counts, and two routes run through the layer. */
  async function layer() {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    const store = db.idempotency;
    let counted = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    // A short wait, so a duplicate of a first request that never finishes meets the 409.
    const idempotency = createIdempotency({ store, logger: silent, now: () => new Date(), waitMs: 50 });
    const app = express();
    app.use((_req, res, next) => {
      res.locals.auth = {
        key: { id: 'key-1' },
        countNow: async () => {
          counted++;
        },
      };
      next();
    });
    app.post('/slow', async (req, res) => {
      await idempotency.run(req, res, 'same', async () => {
        started();
        await gate;
        res.json({ done: true });
      });
    });
    app.post('/boom', async (req, res) => {
      await idempotency.run(req, res, 'boom', async () => {
        throw new Error('a bug');
      });
    });
    app.use(errorHandler(silent));
    const server = createHttpServer(app, { requestTimeoutMs: 60_000 });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const call = (path: string, key: string) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'idempotency-key': key } });
    return {
      call,
      running,
      release: () => release(),
      counted: () => counted,
      async close() {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await db.close();
      },
    };
  }

  it('a duplicate of a request still running past the wait is 409 IDEMPOTENCY_KEY_IN_USE with Retry-After; later it is replayed', async () => {
    const l = await layer();
    try {
      const first = l.call('/slow', 'k');
      await l.running;
      const busy = await l.call('/slow', 'k');
      expect(busy.status).toBe(409);
      expect(busy.headers.get('retry-after')).toBe('1');
      expect(((await busy.json()) as { error: { code: string } }).error.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      l.release();
      expect((await first).status).toBe(200);
      const replay = await l.call('/slow', 'k');
      expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
      expect(await replay.json()).toEqual({ done: true });
      expect(l.counted()).toBe(1);
    } finally {
      await l.close();
    }
  });

  it('a 5xx answer is not kept: the retry runs again (and is counted again, as the 5xx was given back)', async () => {
    const l = await layer();
    try {
      const one = await l.call('/boom', 'b');
      const two = await l.call('/boom', 'b');
      expect([one.status, two.status]).toEqual([500, 500]);
      expect(two.headers.get('idempotent-replayed')).toBeNull();
      expect(l.counted()).toBe(2);
    } finally {
      await l.close();
    }
  });
});
