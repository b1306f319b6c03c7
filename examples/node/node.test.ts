import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The Node examples, run as a user runs them: `node example …` with @compresso/client as installed
// (its built dist/, which `npm ci` and `npm test` build), against a real server.
const run = promisify(execFile);
const here = import.meta.dirname;
const corpus = join(here, '../../../shared/corpus');
const photo = join(corpus, 'photo-skimage-rocket.jpg');
const node16 = join(here, '../../test/node-runtimes/node16/node_modules/node/bin/node');
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';

let server: TestServer;
let key: string;
let out: string;

beforeAll(async () => {
  server = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 10 * 1024 * 1024 } });
  ({ key } = await proAccount(server.db, 'node-example@example.com'));
  out = mkdtempSync(join(tmpdir(), 'compresso-node-example-'));
});
afterAll(async () => {
  await server?.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

function env(apiKey: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, COMPRESSO_API_KEY: apiKey, COMPRESSO_BASE_URL: server.url };
}

describe('examples/node', () => {
  it('compress.cjs writes the same WebP bytes as the curl example with the same options', async () => {
    const viaNode = join(out, 'node.webp');
    const { stdout } = await run(
      process.execPath,
      [join(here, 'compress.cjs'), photo, viaNode, 'webp', '75'],
      {
        env: env(key),
      },
    );
    expect(stdout).toContain(`${photo} -> ${viaNode} (${readFileSync(photo).length} -> `);
    expect(stdout).toMatch(/ bytes, -\d+(\.\d)?%, \d+x\d+\)\n$/);
    const viaCurl = join(out, 'curl.webp');
    await run('sh', [join(here, '../curl/compress.sh'), photo, viaCurl, 'webp', '75'], { env: env(key) });
    expect(readFileSync(viaNode).equals(readFileSync(viaCurl))).toBe(true);
    expect((await sharp(viaNode).metadata()).format).toBe('webp');
  });

  it.runIf(linuxX64)('compress.cjs runs the same on Node 16 (node:http and form-data)', async () => {
    const target = join(out, 'node16.webp');
    await run(node16, [join(here, 'compress.cjs'), photo, target, 'webp', '75'], { env: env(key) });
    expect(readFileSync(target).equals(readFileSync(join(out, 'node.webp')))).toBe(true);
  });

  it('compress.cjs: a bad key exits 1 with the server code and writes nothing', async () => {
    const target = join(out, 'never.webp');
    const failed = await run(process.execPath, [join(here, 'compress.cjs'), photo, target], {
      env: env('cmp_live_not-a-key-at-all-but-of-the-right-length-000000'),
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^INVALID_API_KEY: /);
    expect(() => readFileSync(target)).toThrow();
  });

  it('batch.mjs: every good image written, the broken one reported by code, exit 1', async () => {
    const broken = join(out, 'broken.jpg');
    writeFileSync(broken, readFileSync(photo).subarray(0, 3000));
    const inputs = [photo, join(corpus, 'graphic-skimage-text.png'), broken];
    const failed = await run(process.execPath, [join(here, 'batch.mjs'), join(out, 'batch'), ...inputs], {
      env: env(key),
    }).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr.trim().split('\n')).toEqual(['1/3', '2/3', '3/3']);
    const lines = failed.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      `${photo} -> ${join(out, 'batch', 'photo-skimage-rocket.webp')} (-${lines[0]!.match(/-(\d+(\.\d)?)%\)$/)![1]}%)`,
    );
    expect(lines[1]).toContain(join(out, 'batch', 'graphic-skimage-text.webp'));
    expect(lines[2]).toBe(`${broken} FAILED CORRUPT_IMAGE: ${lines[2]!.split('CORRUPT_IMAGE: ')[1]}`);
    expect((await sharp(join(out, 'batch', 'graphic-skimage-text.webp')).metadata()).format).toBe('webp');
  });
});
