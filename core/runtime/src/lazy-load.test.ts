import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const repo = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every package a fresh process resolves while running `code`. */
function packagesLoadedBy(code: string): Promise<string[]> {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({
      resolve(specifier, context, next) {
        if (!specifier.startsWith('.') && !specifier.startsWith('node:') && !specifier.startsWith('file:')) seen.add(specifier);
        return next(specifier, context);
      },
    });
    ${code}
    console.log(JSON.stringify([...seen]));
  `;
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { cwd: repo, env: { PATH: process.env.PATH ?? '', COMPRESSO_DATA_DIR: dir } },
      (error, stdout, stderr) =>
        error ? fail(new Error(`${error.message}\n${stderr}`)) : done(JSON.parse(stdout)),
    );
  });
}

describe('heavy drivers load only when configured', () => {
  it('the embedded backends load no pg, bullmq, ioredis or AWS SDK', async () => {
    const loaded = await packagesLoadedBy(`
      const { loadConfig, openDatabase, openQueue, openBlobStore } = await import('@compresso/runtime');
      const config = loadConfig(process.env);
      const db = await openDatabase(config);
      const queue = await openQueue(config);
      const blobs = await openBlobStore(config);
      await blobs.put('x', new Uint8Array([1]));
      await Promise.all([db.close(), queue.close(), blobs.close()]);
    `);
    expect(loaded).toContain('@compresso/runtime');
    expect(loaded.filter((p) => /^(pg|bullmq|ioredis|@aws-sdk\/)/.test(p))).toEqual([]);
  });

  it('REDIS_URL and S3_BUCKET bring in BullMQ and the AWS SDK', async () => {
    const loaded = await packagesLoadedBy(`
      const { loadConfig, openQueue, openBlobStore } = await import('@compresso/runtime');
      const config = loadConfig({ ...process.env, REDIS_URL: 'redis://127.0.0.1:1', S3_BUCKET: 'lazy-check', S3_ENDPOINT: 'http://127.0.0.1:1' });
      const queue = await openQueue(config);
      const blobs = await openBlobStore(config);
      await Promise.all([queue.close(), blobs.close()]);
    `);
    expect(loaded).toEqual(expect.arrayContaining(['bullmq', 'ioredis', '@aws-sdk/client-s3']));
  });
});
