import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join } from 'node:path';
import { createLogger, quotaDay } from '@compresso/runtime';
import { type RunningServer, startServer } from '@compresso/server';
import { proAccount, startTestServer } from '@compresso/server/testing';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AbortError, Compresso, type Job, UnsupportedImageError } from './index.ts';
import { CORPUS, PHOTO, truncated, workDir } from './test-support.ts';

/**
 * client.jobs against the real server as `compresso serve` runs it (startServer on port 0): the
 * embedded default (SQLite file, in-process queue, files on disk, one worker in the process), and
 * PostgreSQL + Redis (BullMQ), each run in a database and a queue prefix of its own.
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = randomBytes(4).toString('hex');
const dbName = `cmp_cjobs_${run}`;
const work = workDir('jobs');
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });
const silent = createLogger({ logLevel: 'silent' });
const images: string[] = [];
/** Serves the corpus images to jobs made from URLs. */
let origin: Server;
let originUrl: string;

beforeAll(async () => {
  await admin.query(`CREATE DATABASE "${dbName}"`);
  for (const [i, name] of [
    'photo-skimage-rocket.jpg',
    'photo-skimage-chelsea.png',
    'icon-oxygen-konqueror.png',
  ].entries()) {
    const ext = name.endsWith('.png') ? 'png' : 'jpg';
    const path = join(work.dir, `in-${i}.${ext}`);
    await sharp(join(CORPUS, name))
      .resize(128, 128, { fit: 'inside' })
      .toFormat(ext === 'png' ? 'png' : 'jpeg', { quality: 95 })
      .toFile(path);
    images.push(path);
  }
  origin = createServer((req, res) => {
    const i = Number(/\/(\d)\.jpg$/.exec(req.url ?? '')?.[1] ?? -1);
    if (!images[i]) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'image/jpeg' }).end(readFileSync(images[i]!));
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});
afterAll(async () => {
  origin?.close();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
  work.cleanup();
});

const BACKENDS = {
  embedded: () => ({}),
  'postgres+redis': () => {
    const url = new URL(ADMIN_URL);
    url.pathname = `/${dbName}`;
    return {
      DATABASE_URL: url.toString(),
      REDIS_URL,
      COMPRESSO_QUEUE_PREFIX: `cmpcj${run}`,
      COMPRESSO_WORKERS: '1',
    };
  },
};

describe('compressBatch via a job on a server without a job queue', () => {
  it('falls back to one request per input (503 SERVICE_UNAVAILABLE from POST /api/v1/jobs)', async () => {
    const srv = await startTestServer({ dbPath: join(work.dir, 'no-queue.sqlite') });
    try {
      const { key } = await proAccount(srv.db, 'no-queue@example.com');
      const client = new Compresso(key, { baseUrl: srv.url, maxRetries: 0 });
      const items = await client.compressBatch([images[0]!, images[1]!], { via: 'job' });
      expect(items.map((i) => i.ok)).toEqual([true, true]);
      const paths = srv.logLines
        .filter((l) => l['msg'] === 'request')
        .map((l) => `${l['path']} ${l['status']}`);
      expect(paths.filter((p) => p === '/api/v1/jobs 503')).toHaveLength(1);
      expect(paths.filter((p) => p === '/api/v1/compress 200')).toHaveLength(2);
    } finally {
      await srv.close();
    }
  });
});

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('client.jobs on %s', (backend) => {
  let server: RunningServer;
  let key: string;
  let accountId: string;
  let client: Compresso;

  beforeAll(async () => {
    server = await startServer({
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        COMPRESSO_DATA_DIR: join(work.dir, `data-${backend}`),
        COMPRESSO_FETCH_ALLOW_PRIVATE: 'true',
        ...BACKENDS[backend](),
      },
      logger: silent,
      handleSignals: false,
    });
    ({ key, accountId } = await proAccount(server.db, `jobs-${backend}@example.com`));
    client = new Compresso(key, { baseUrl: server.url });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('create from files, wait with progress, download: results in the folder, the corrupt item as its typed error, n items counted once', async () => {
    const corrupt = join(work.dir, `corrupt-${backend}.jpg`);
    writeFileSync(corrupt, truncated(PHOTO));
    const before = await server.db.usageOn(accountId, quotaDay());
    const created = await client.jobs.create({
      files: [images[0]!, readFileSync(images[1]!), corrupt, images[2]!],
      options: { format: 'webp', quality: 60 },
    });
    expect(created.id).toMatch(/^job_/);
    expect(created.progress.total).toBe(4);
    expect(created.options).toMatchObject({ output_format: 'webp', quality: 60 });
    expect(created.items.map((i) => i.name)).toEqual([
      'in-0.jpg',
      'image',
      `corrupt-${backend}.jpg`,
      'in-2.png',
    ]);

    const seen: Job[] = [];
    const done = await client.jobs.wait(created, { onProgress: (job) => seen.push(job), pollInterval: 20 });
    expect(done.status).toBe('completed');
    expect(done.progress).toMatchObject({ total: 4, done: 3, failed: 1, queued: 0, percent: 100 });
    expect(seen.at(-1)).toEqual(done);
    // Called on changes only, and progress never goes back.
    const finished = seen.map((j) => j.progress.done + j.progress.failed);
    expect(finished).toEqual([...finished].sort((a, b) => a - b));
    expect(new Set(seen.map((j) => `${j.status} ${j.progress.done} ${j.progress.failed}`)).size).toBe(
      seen.length,
    );
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 4);

    const outputDir = join(work.dir, `out-${backend}`);
    const downloads = await client.jobs.download(done.id, { outputDir });
    expect(downloads.map((d) => d.ok)).toEqual([true, true, false, true]);
    expect(readdirSync(outputDir).sort()).toEqual(['image.webp', 'in-0.webp', 'in-2.webp']);
    for (const d of downloads) {
      if (!d.ok) continue;
      expect(d.path).toBe(join(outputDir, d.item.outputName!));
      expect((await sharp(d.path).metadata()).format).toBe('webp');
      expect(readFileSync(d.path).length).toBe(d.item.outputSize);
    }
    const failed = downloads[2]!;
    expect(failed.error).toBeInstanceOf(UnsupportedImageError);
    expect([failed.error?.code, failed.error?.status]).toEqual(['CORRUPT_IMAGE', 422]);
    // Polling and downloading are not counted.
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 4);
  });

  it('create from URLs; a name two items share is written as name and name-2', async () => {
    const job = await client.jobs.create({
      urls: [`${originUrl}/a/0.jpg`, `${originUrl}/b/0.jpg`],
      options: { maxDimension: 64 },
    });
    const done = await client.jobs.wait(job.id, { pollInterval: 20 });
    expect(done.items.map((i) => [i.status, i.url, i.width! <= 64])).toEqual([
      ['done', `${originUrl}/a/0.jpg`, true],
      ['done', `${originUrl}/b/0.jpg`, true],
    ]);
    const outputDir = join(work.dir, `urls-${backend}`);
    const downloads = await client.jobs.download(done, { outputDir });
    expect(downloads.map((d) => d.path)).toEqual([join(outputDir, '0.jpg'), join(outputDir, '0-2.jpg')]);
  });

  it('a retry after a lost answer reuses its Idempotency-Key: one job, counted once', async () => {
    let lost = 0;
    const keys: string[] = [];
    // The real answer arrives, and is then lost on the way back, once: the client must retry.
    const losing = new Compresso(key, {
      baseUrl: server.url,
      fetch: async (input, init) => {
        const headers = new Headers(init?.headers);
        if (init?.method === 'POST') keys.push(headers.get('idempotency-key') ?? '');
        const response = await fetch(input, init);
        if (init?.method === 'POST' && lost++ === 0) {
          await response.arrayBuffer();
          throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNRESET' } });
        }
        return response;
      },
    });
    const before = await server.db.usageOn(accountId, quotaDay());
    const job = await losing.jobs.create({ files: [images[0]!, images[1]!] });
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 2);
    // The same for a single compress: counted once, the answer as the first.
    const result = await losing.compress(images[0]!, { output: false, format: 'webp' });
    expect(result.format).toBe('webp');
    expect(keys).toHaveLength(3);
    expect(keys[2]).not.toBe(keys[0]);
    lost = 0;
    const again = await losing.compress(images[0]!, { output: false, format: 'webp' });
    expect(keys).toHaveLength(5);
    expect(keys[4]).toBe(keys[3]);
    expect(keys[3]).not.toBe(keys[2]);
    expect(again.data).toEqual(result.data);
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 4);
    // Each call has its own key; a caller's own key is used as given, and replayed across calls.
    const own = `own-${run}-${backend}`;
    const first = await client.jobs.create({ files: [images[2]!], idempotencyKey: own });
    const second = await client.jobs.create({ files: [images[2]!], idempotencyKey: own });
    expect(second.id).toBe(first.id);
    expect(job.id).not.toBe(first.id);
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 5);
    await client.jobs.wait(job, { pollInterval: 20 });
    await client.jobs.wait(first, { pollInterval: 20 });
  });

  it("wait() polls on the server's Retry-After rather than its own interval; a signal stops it", async () => {
    const job = await client.jobs.create({ files: [images[1]!] });
    let polls = 0;
    // A Retry-After of 0 on every answer: with the hour-long pollInterval the test would time out
    // unless the header is what sets the pace.
    const paced = new Compresso(key, {
      baseUrl: server.url,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        polls++;
        const headers = new Headers(response.headers);
        headers.set('retry-after', '0');
        return new Response(await response.arrayBuffer(), { status: response.status, headers });
      },
    });
    const done = await paced.jobs.wait(job.id, { pollInterval: 3_600_000 });
    expect(done.status).toBe('completed');
    expect(polls).toBeGreaterThanOrEqual(1);

    // Stopped while waiting between polls: the caller's signal ends the wait with AbortError.
    const controller = new AbortController();
    const stopped = await client.jobs
      .wait(job.id, {
        pollInterval: 3_600_000,
        onProgress: () => controller.abort(new Error('enough')),
        signal: controller.signal,
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    // The job is complete by now, so wait() returns at the first poll without sleeping: no error.
    expect(stopped).toBeUndefined();
    const pending = await client.jobs.create({ files: [images[0]!] });
    const early = new AbortController();
    early.abort(new Error('before the first poll'));
    const refused = await client.jobs.wait(pending, { signal: early.signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(AbortError);
    await client.jobs.wait(pending, { pollInterval: 20 });
  });

  it("compressBatch via: 'job' writes the same files and reports the same facts as the fan-out, one submission", async () => {
    const missing = join(work.dir, 'does-not-exist.jpg');
    const inputs = [images[0]!, images[1]!, missing, images[2]!, images[0]!];
    const before = await server.db.usageOn(accountId, quotaDay());
    const progress: number[] = [];
    const viaJob = await client.compressBatch(inputs, {
      via: 'job',
      format: 'webp',
      outputDir: join(work.dir, `via-job-${backend}`),
      onProgress: (event) => progress.push(event.completed),
    });
    const viaRequests = await client.compressBatch(inputs, {
      format: 'webp',
      outputDir: join(work.dir, `via-requests-${backend}`),
    });
    expect(progress).toEqual([1, 2, 3, 4, 5]);
    expect(viaJob.map((i) => i.ok)).toEqual([true, true, false, true, true]);
    expect(viaJob[2]!.error?.code).toBe(viaRequests[2]!.error?.code);
    for (const [k, item] of viaJob.entries()) {
      const other = viaRequests[k]!;
      if (!item.ok || !other.ok) continue;
      expect(basename(item.result.outputPath!)).toBe(basename(other.result.outputPath!));
      const { data, outputPath, requestId, ...facts } = item.result;
      const { data: otherData, outputPath: otherPath, requestId: otherId, ...otherFacts } = other.result;
      expect(facts).toEqual(otherFacts);
      expect(readFileSync(outputPath!)).toEqual(data);
    }
    // Four files each way: counted four times each, not more.
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + 8);
    // A caller's key for a fan-out is not put on every request (each would be a different request
    // under one key): each input still gets a key of its own.
    const own = await client.compressBatch([images[0]!, images[1]!], {
      idempotencyKey: `fan-out-${run}-${backend}`,
      outputDir: join(work.dir, `own-key-${backend}`),
    });
    expect(own.map((i) => i.ok)).toEqual([true, true]);
  });

  it('refuses a call that cannot be right before sending it', async () => {
    await expect(client.jobs.create({ files: [images[0]!], urls: ['https://x'] })).rejects.toThrow(
      /exactly one of them/,
    );
    await expect(client.jobs.create({ files: [] })).rejects.toThrow(/files: expected a non-empty list/);
    await expect(client.jobs.download('job_x', { outputDir: '' })).rejects.toThrow(/outputDir/);
    await expect(client.jobs.get('job_nope')).rejects.toMatchObject({ code: 'NOT_FOUND', status: 404 });
    await expect(client.compress(images[0]!, { output: false, idempotencyKey: 'has space' })).rejects.toThrow(
      /idempotencyKey: expected 1 to 255 visible ASCII/,
    );
  });
});
