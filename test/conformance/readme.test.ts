import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The runtime README's examples run as written: queue-and-blobs on the embedded backends and on
 * BullMQ, app-process (startProcess with an app's own settings and tables) on the embedded ones.
 */
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

const block = (name: string) => {
  const readme = readFileSync(join(repo, 'core/runtime/README.md'), 'utf8');
  const code = new RegExp(`<!-- run: ${name}[^>]*-->\\s*\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1];
  if (!code) throw new Error(`core/runtime/README.md has no "run: ${name}" block`);
  return code;
};

const run = (env: Record<string, string>, name = 'queue-and-blobs') =>
  new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      ['--input-type=module-typescript', '-e', block(name)],
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

  it('the app-process example starts, migrates its own table, and closes', async () => {
    const dataDir = join(dir, 'app');
    const env = { COMPRESSO_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SHOPIFY_API_KEY: 'key-1' };
    const out = await run({ ...env, SHOPIFY_API_SECRET: 'a-secret-of-16-chars' }, 'app-process');
    expect(out).toBe('key-1 sqlite inline file');
    const db = new DatabaseSync(join(dataDir, 'compresso.sqlite'));
    try {
      expect(db.prepare('SELECT domain FROM shop_installs').all()).toEqual([
        { domain: 'demo.myshopify.com' },
      ]);
      expect(db.prepare('SELECT version FROM shop_schema_migrations').all()).toEqual([{ version: 1 }]);
    } finally {
      db.close();
    }
    // One message for the base and the app's problems.
    await expect(run({ ...env, PORT: 'x', SHOPIFY_API_SECRET: 'short' }, 'app-process')).rejects.toThrow(
      /Invalid configuration:\n {2}- PORT: [^\n]*\n {2}- SHOPIFY_API_SECRET: [^\n]*\[redacted\]/,
    );
  });
});
