import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

/** The runtime README's queue-and-blobs example runs as written, on the embedded backends and on BullMQ. */
const repo = resolve(import.meta.dirname, '../..');
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `cmp-readme-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'compresso-runtime-readme-'));

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const keys = await redis.keys(`${prefix}:*`).catch(() => [] as string[]);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const block = () => {
  const readme = readFileSync(join(repo, 'core/runtime/README.md'), 'utf8');
  const code = /<!-- run: queue-and-blobs[^>]*-->\s*```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!code) throw new Error('core/runtime/README.md has no "run: queue-and-blobs" block');
  return code;
};

const run = (env: Record<string, string>) =>
  new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      ['--input-type=module-typescript', '-e', block()],
      { cwd: repo, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (error, stdout, stderr) =>
        error ? fail(new Error(`${error.message}\n${stderr}`)) : done(stdout.trim()),
    );
  });

describe('core/runtime README', () => {
  it('the queue-and-blobs example runs in one process with no servers', async () => {
    const out = await run({ COMPRESSO_DATA_DIR: join(dir, 'embedded') });
    expect(out).toBe("inline completed { out: 'uploads/1/photo.jpg.out' } 3");
    expect(readFileSync(join(dir, 'embedded/blobs/uploads/1/photo.jpg.out~'))).toEqual(
      Buffer.from([1, 2, 3]),
    );
  });

  it('and on BullMQ with REDIS_URL', async () => {
    const out = await run({
      COMPRESSO_DATA_DIR: join(dir, 'redis'),
      REDIS_URL,
      COMPRESSO_QUEUE_PREFIX: prefix,
    });
    expect(out).toBe("bullmq completed { out: 'uploads/1/photo.jpg.out' } 3");
  });
});
