import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger, quotaDay } from '@compresso/runtime';
import { type RunningServer, startServer } from '@compresso/server';
import { proAccount } from '@compresso/server/testing';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOB_THRESHOLD } from './server.ts';
import { type Connected, connect, PHOTO, workDir } from './test-support.ts';

/**
 * compress_batch on a large batch runs as one server-side job, against the real server as `compresso
 * serve` runs it (startServer on port 0): the embedded default (SQLite file, in-process queue, files on
 * disk, a worker in the process) and PostgreSQL + Redis (BullMQ), each in a database and a queue prefix
 * of its own.
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = randomBytes(4).toString('hex');
const dbName = `cmp_mcpjobs_${run}`;
const work = workDir('jobs');
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });

beforeAll(async () => {
  await admin.query(`CREATE DATABASE "${dbName}"`);
});
afterAll(async () => {
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
      COMPRESSO_QUEUE_PREFIX: `cmpmj${run}`,
      COMPRESSO_WORKERS: '1',
    };
  },
};

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('compress_batch on %s', (backend) => {
  let server: RunningServer;
  let accountId: string;
  let mcp: Connected;
  /** The server's request log lines (method, path, status), to see which routes a batch used. */
  const requests: { path: string; status: number }[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n')) {
          if (!line) continue;
          const entry = JSON.parse(line) as { msg?: string; path?: string; status?: number };
          if (entry.msg === 'request')
            requests.push({ path: String(entry.path), status: Number(entry.status) });
        }
        done();
      },
    });
    server = await startServer({
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        COMPRESSO_DATA_DIR: join(work.dir, `data-${backend}`),
        ...BACKENDS[backend](),
      },
      logger: createLogger({ logLevel: 'info' }, sink),
      handleSignals: false,
    });
    const account = await proAccount(server.db, `mcp-jobs-${backend}@example.com`);
    accountId = account.accountId;
    mcp = await connect({ apiKey: account.key, baseUrl: server.url, env: {} });
  });
  afterAll(async () => {
    await mcp?.close();
    await server?.close();
  });

  it(`more than ${JOB_THRESHOLD} files: one job (no compress request), each file's result or its error, counted once per file`, async () => {
    const dir = join(work.dir, `in-${backend}`);
    const out = join(work.dir, `out-${backend}`);
    mkdirSync(dir);
    const small = await sharp(PHOTO).resize(160).jpeg({ quality: 95 }).toBuffer();
    const paths: string[] = [];
    for (let i = 0; i < JOB_THRESHOLD + 2; i++) {
      const path = join(dir, `p${String(i).padStart(2, '0')}.jpg`);
      // The fifth file is cut short: the job fails that item alone.
      writeFileSync(path, i === 4 ? small.subarray(0, 600) : small);
      paths.push(path);
    }
    const before = await server.db.usageOn(accountId, quotaDay());
    const seen = requests.length;
    const progress: number[] = [];
    const result = await mcp.call(
      'compress_batch',
      { file_paths: paths, output_dir: out, output_format: 'webp', quality: 60 },
      (p) => progress.push(p.progress),
    );
    expect(result.isError).toBeFalsy();
    const sent = requests.slice(seen);
    expect(sent.filter((r) => r.path === '/api/v1/jobs' && r.status === 202)).toHaveLength(1);
    expect(sent.filter((r) => r.path === '/api/v1/compress')).toHaveLength(0);
    const s = result.structuredContent as {
      total: number;
      succeeded: number;
      failed: number;
      results: { file_path: string; ok: boolean; output_path?: string; error?: { code: string } }[];
    };
    expect([s.total, s.succeeded, s.failed]).toEqual([paths.length, paths.length - 1, 1]);
    expect(s.results.map((r) => r.file_path)).toEqual(paths);
    expect(s.results[4]).toMatchObject({ ok: false, error: { code: 'CORRUPT_IMAGE' } });
    const written = readdirSync(out).sort();
    expect(written).toEqual(
      paths.filter((_, i) => i !== 4).map((p) => p.slice(dir.length + 1, -4) + '.webp'),
    );
    for (const r of s.results.filter((r) => r.ok)) {
      const bytes = readFileSync(r.output_path!);
      expect(bytes.subarray(8, 12).toString('latin1')).toBe('WEBP');
      expect(statSync(r.output_path!).size).toBeLessThan(small.length);
    }
    expect(progress).toHaveLength(paths.length);
    expect(progress.at(-1)).toBe(paths.length);
    // A job is counted once per item when submitted; polling and downloads are not counted.
    expect(await server.db.usageOn(accountId, quotaDay())).toBe(before + paths.length);
  });
});
